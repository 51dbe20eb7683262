"""Issue 48: an example's spec runs as written on the local 3-node cluster,
as its README tells a new user to run it (`sed "s|@REPO@|$PWD|g"`, then
`tfctl submit`), and its charts show training: examples/mnist_tf on its
generated digits learns (the chief's loss falls well below chance, ln 10 =
2.30, and the evaluator's accuracy rises well above 10%)."""
import json
import math
import os
import re

import pytest

from conftest import REPO
from test_tensorflow import wait_ended
from test_tfctl import home, ok, run_tfctl  # noqa: F401

VENV_PYTHON = "/opt/tfslurm/venv-tf/bin/python"


@pytest.fixture(scope="module")
def tf_python():
    python = os.environ.get("TFSLURM_TF_PYTHON", VENV_PYTHON)
    if not os.access(python, os.X_OK):
        pytest.fail(f"no TensorFlow python at {python}: run deploy/install-tf.sh (tests/run.sh does) "
                    "and set TFSLURM_TF_PYTHON to the path it prints")
    return python


def test_mnist_tf_runs_as_written_and_learns(service, home, tmp_path, tf_python):
    text = open(os.path.join(REPO, "examples/mnist_tf/experiment.yaml")).read()
    assert "/home/" not in text, "no user's own path in an example"
    spec = tmp_path / "mnist.yaml"
    # As the README says; the venv's python only where install-tf.sh put it
    # elsewhere (not as root).
    spec.write_text(text.replace("@REPO@", REPO).replace(VENV_PYTHON, tf_python))
    out = ok(run_tfctl(home, "submit", str(spec), url=service.url))
    assert out.startswith("submitted mnist-ps-01: attempt 1"), out
    done = wait_ended(service, "mnist-ps-01", 600)
    assert done["state"] == "succeeded", done["reason"]

    metrics = json.loads(ok(run_tfctl(home, "metrics", "mnist-ps-01", "-o", "json", url=service.url)))
    # The chief's and the evaluator's TensorBoard summaries, each tag after
    # its event file's directory (docs/scalars.md).
    series = {s["tag"]: s for s in metrics["series"]}
    assert set(series) == {"tensorboard/train/loss", "tensorboard/eval/accuracy"}, sorted(series)
    loss = [v for v in series["tensorboard/train/loss"]["value"] if v is not None]
    accuracy = [v for v in series["tensorboard/eval/accuracy"]["value"] if v is not None]
    chance = math.log(10)
    print(f"loss {loss[0]:.3f} -> {loss[-1]:.3f} over {len(loss)} reports; accuracy {accuracy}")
    assert loss[-1] < 0.5 * chance, f"the loss stays near chance ({chance:.2f}): {loss}"
    assert min(loss[len(loss) // 2:]) < loss[0] / 2, loss
    assert accuracy[-1] > 0.5, f"the evaluator's accuracy: {accuracy}"
    # The chief saved its last step; tfslurm saw it.
    steps = int(re.search(r'--steps, "(\d+)"', text).group(1))
    assert done["checkpoint"]["step"] == steps, done["checkpoint"]
