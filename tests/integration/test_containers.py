"""Issue 44: training in containers, on the local cluster with real runtimes.

The cluster runs pyxis 0.24.0 and enroot 4.1.2 (deploy/local-slurm/start.sh
--containers, from deploy/containers/setup.sh), and the images are real ones
built locally (deploy/containers/build-images.sh; helpers/images.py finds
their directory, or waits for tests/run.sh to build it): Debian 12 with
python3 and tensorflow-cpu from PyPI, and with Debian's python3-torch. The programs are the repository's examples, run by
the image's own python3; nothing of tfslurm is in the images.
"""
import os
import pwd
import glob
import re
import shutil
import signal
import subprocess

import pytest

from conftest import REPO, program_pid, programs, wait_for
from helpers.images import container_images
from helpers.oci_support import oci_refused_here, slurmctld_release
from test_metrics import scrape
from unix_users import ALICE, site, token_for  # noqa: F401 (site is a fixture)
from test_tensorflow import TF_ENV, all_ended, proc_of, task_log, wait_ended


# Last in the session: tests/run.sh builds the images meanwhile (helpers/images.py).
pytestmark = pytest.mark.images


@pytest.fixture(scope="module")
def images():
    return container_images()


@pytest.fixture(scope="module")
def pyxis_cluster(slurm_cluster):
    plugstack = os.path.join(os.path.dirname(slurm_cluster), "plugstack.conf")
    if "spank_pyxis.so" not in open(plugstack).read():
        pytest.fail("the local cluster runs without pyxis: start it with deploy/local-slurm/start.sh "
                    "--containers \"$(deploy/containers/setup.sh)\" (tests/containers.sh says how)")
    return slurm_cluster


@pytest.fixture
def enroot_on_path(monkeypatch):
    """enroot on the PATH of the jobs tfslurmd submits (tfslurmd gives jobs
    its own PATH): a site installs it in /usr/bin; here it is in the
    directory start.sh --containers put on the daemons' PATH."""
    cdir = os.environ.get("LOCAL_SLURM_CONTAINERS")
    if not cdir:
        pytest.fail("LOCAL_SLURM_CONTAINERS is not set: eval \"$(tests/containers.sh)\" first")
    monkeypatch.setenv("PATH", os.path.join(cdir, "bin") + ":" + os.environ["PATH"])


@pytest.fixture
def tf_imports_dropped_after(slurm_cluster):
    """The TF image's imports removed from every node after the test: each is
    2.4 GB unsquashed, one per node and runtime (pyxis and enroot name theirs
    apart), and the local cluster's nodes share one disk; kept, the module
    would need about 15 GB at once. Each TF test imports cold; reuse within a
    test (tasks of a node, attempts in place) is what these tests check."""
    yield
    node_local = os.path.join(os.path.dirname(os.path.dirname(slurm_cluster)), "node-local")
    for data in glob.glob(os.path.join(node_local, "*", "enroot-data-*")):
        for entry in os.listdir(data):
            shutil.rmtree(os.path.join(data, entry), ignore_errors=True)


def container_spec(exp_id, image, runtime, steps=200, **extra):
    """examples/mnist_tf in the TF image: 1 chief, 2 ps, 2 workers, 1 evaluator on 3 nodes x 2."""
    example = os.path.join(REPO, "examples", "mnist_tf")
    spec = {
        "id": exp_id,
        "command": ["python3", os.path.join(example, "train.py"), "--data", "synthetic", "--steps", str(steps),
                    "--checkpoint-every", "50", "--steps-per-dispatch", "25", "--eval-interval", "1"],
        "workdir": example,
        "env": dict(TF_ENV),
        "cluster": {"chief": 1, "ps": 2, "worker": 2, "evaluator": 1},
        "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 2, "time_limit": "00:10:00"},
        "success": "chief",
        "restart": {"max_restarts": 0},
        "container": {"image": image, "runtime": runtime},
    }
    spec.update(extra)
    return spec


IMAGE_OF = {"pyxis": "tf.sqsh", "enroot": "tf.sqsh", "oci": "tf.oci"}


@pytest.mark.parametrize("runtime", ["pyxis", "enroot", "oci"])
def test_tf_parameter_servers_in_the_image_succeed_and_the_ps_are_reaped(enroot_on_path, service, pyxis_cluster,
                                                                        images, runtime, tf_imports_dropped_after):
    """Under Slurm's OCI support (srun --container, the cluster's oci.conf:
    rootless runc) the image is the TF image as a runtime bundle. On Slurm
    22.05, whose OCI support cannot run the attempt's bundle (it replaces
    root.path, one task per node), that submission is refused naming
    container.runtime, and nothing is stored; tests/compat.sh runs it for
    real on 26.05.3."""
    exp_id = f"ctr-ps-{runtime}"
    steps = 150
    spec = container_spec(exp_id, os.path.join(images, IMAGE_OF[runtime]), runtime, steps)
    _, before = scrape(service)
    status, body = service.post("/experiments", spec)
    if runtime == "oci" and oci_refused_here(service, spec, status, body):
        return
    assert status == 201, body
    done = wait_ended(service, exp_id, 420)
    assert done["state"] == "succeeded", done["reason"] + logs_of(service, exp_id)
    done = all_ended(service, exp_id)
    states = {f'{t["role"]}:{t["index"]}': t["state"] for t in done["tasks"]}
    assert states == {"chief:0": "succeeded", "ps:0": "reaped", "ps:1": "reaped", "worker:0": "reaped",
                      "worker:1": "reaped", "evaluator:0": "reaped"}, states
    chief_log = task_log(done, proc_of(done, "chief"))
    assert f"mnist_tf: done step={steps}" in chief_log, chief_log[-2000:]
    # The image's python3 and TensorFlow ran it: the host's python3 (the
    # command's "python3" outside the image) has no TensorFlow at all.
    host = subprocess.run(["python3", "-c", "import tensorflow"], capture_output=True)
    assert host.returncode != 0, "the host's python3 imports tensorflow: this test would prove nothing"
    # How it shows: the API gives the image and the runtime per role.
    containers = {r["role"]: r for r in done["containers"]}
    assert containers["ps"]["runtime"] == runtime, done
    assert containers["ps"]["image"].endswith(IMAGE_OF[runtime]), done
    # /metrics: six containers (one per task, or per program under enroot:
    # nothing restarted here), and six task starts after srun's launch, the
    # image's cold import in them under pyxis (OCI imports nothing).
    _, after = scrape(service)

    def grew(name):
        return after.get(name, 0) - before.get(name, 0)
    assert grew(f'tfslurm_container_starts_total{{runtime="{runtime}"}}') == 6, after
    assert grew(f'tfslurm_task_start_seconds_count{{runtime="{runtime}"}}') == 6, after
    if runtime == "pyxis":  # tf.sqsh imported on each node (tf_imports_dropped_after): seconds
        assert grew(f'tfslurm_task_start_seconds_sum{{runtime="{runtime}"}}') > 6 * 0.5, after


def test_pytorch_ddp_in_debians_torch_image_through_pyxis_every_rank_ends_with_the_same_parameters(
        service, pyxis_cluster, images, tf_imports_dropped_after):
    """Real PyTorch DDP (gloo) in an image of Debian 12 with python3-torch,
    run by pyxis on 2 nodes x 2 ranks: examples/ddp as test_pytorch.py runs
    it on the host, with the torch variables tfslurm gives every rank, and
    the node's relay carrying the agents, which pyxis runs inside the
    container. Each rank's program runs in the image (its own root file
    system, which has no Slurm), and every rank ends with the parameters
    DDP's all-reduce left them."""
    from test_pytorch import DDP, digests
    torch_image = os.path.join(images, "torch.sqsh")
    assert os.path.exists(torch_image), f"no {torch_image}: deploy/containers/build-images.sh makes it"
    steps = 60
    spec = {"id": "ctr-ddp", "framework": "pytorch",
            "command": ["python3", DDP, "--steps", str(steps), "--checkpoint-every", "30", "--step-delay-ms", "20"],
            "workdir": os.path.dirname(DDP),
            "resources": {"partition": "debug", "nodes": 2, "tasks_per_node": 2, "time_limit": "00:10:00"},
            "pytorch": {"omp_num_threads": 1},
            "restart": {"max_restarts": 0},
            "container": {"image": torch_image, "runtime": "pyxis"}}
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    exp = wait_for(lambda: (lambda e: e if "step=" in task_log(e, 0) else None)(service.experiment("ctr-ddp")),
                   300, "rank 0's first training step")
    pid0 = wait_for(lambda: next(iter(programs({"EXPERIMENT_ID=ctr-ddp", "RANK=0"})), None), 30,
                    "rank 0's program")
    assert os.stat(f"/proc/{pid0}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino
    assert not os.path.exists(f"/proc/{pid0}/root/usr/bin/srun"), "rank 0 runs in the image, not on the host"
    assert os.path.exists(f"/proc/{pid0}/root/usr/lib/python3/dist-packages/torch/__init__.py")

    done = wait_ended(service, "ctr-ddp", 300)
    assert done["state"] == "succeeded", done["reason"] + logs_of(service, "ctr-ddp")
    assert "every rank exited 0 (4 ranks)" in done["reason"], done["reason"]
    master = exp["tasks"][0]["address"]
    for t in done["tasks"]:
        rank = t["index"]
        log = task_log(done, t["proc_id"])
        assert (f"ddp: rank={rank} local_rank={rank % 2} world=4 node_rank={rank // 2} "
                f"master={master} attempt=1 start_step=0") in log, log[-2000:]
        assert "through the node's relay" in log, log[-2000:]
    found = digests(done["model_dir"])
    assert len(found) == 4 and len(set(found.values())) == 1, found
    assert next(iter(found.values()))[0] == str(steps)


def test_a_missing_image_is_a_startup_error_in_pyxiss_words_after_one_attempt(service, pyxis_cluster, images):
    spec = container_spec("ctr-missing", "/nonexistent/tf.sqsh", "pyxis")
    spec["restart"] = {"max_restarts": 3}
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    done = service.wait_state("ctr-missing", "failed", timeout=120)
    assert done["attempt"] == 1, done
    attempt = done["attempts"][-1] if "attempts" in done else None
    assert "No such file or directory: /nonexistent/tf.sqsh" in done["reason"], done["reason"]
    assert "startup_error" in (attempt or {}).get("end_reason", "startup_error"), attempt


def test_enroot_names_a_missing_image_and_a_missing_command_as_startup_errors(enroot_on_path, service,
                                                                             pyxis_cluster, images):
    spec = container_spec("ctr-enroot-missing", "/nonexistent/tf.sqsh", "enroot")
    spec["restart"] = {"max_restarts": 3}
    assert service.post("/experiments", spec)[0] == 201
    done = service.wait_state("ctr-enroot-missing", "failed", timeout=120)
    assert done["attempt"] == 1, done
    assert "No such file or directory: /nonexistent/tf.sqsh" in done["reason"], done["reason"]

    spec = container_spec("ctr-enroot-nocmd", os.path.join(images, "python.sqsh"), "enroot")
    spec["command"] = ["trian.py"]
    spec["restart"] = {"max_restarts": 3}
    assert service.post("/experiments", spec)[0] == 201
    done = service.wait_state("ctr-enroot-nocmd", "failed", timeout=120)
    assert done["attempt"] == 1, done
    assert "cannot run 'trian.py' in the container" in done["reason"], done["reason"]


def test_a_missing_runtime_is_a_startup_error_in_the_launchers_words(service, pyxis_cluster, images):
    """enroot not on the jobs' PATH: the agent's launcher cannot run it."""
    spec = container_spec("ctr-no-enroot", os.path.join(images, "python.sqsh"), "enroot")
    spec["restart"] = {"max_restarts": 3}
    assert service.post("/experiments", spec)[0] == 201
    done = service.wait_state("ctr-no-enroot", "failed", timeout=120)
    assert done["attempt"] == 1, done
    assert "cannot run 'enroot': No such file or directory" in done["reason"], done["reason"]


def test_a_spec_with_runtime_auto_is_refused_without_a_site_runtime(service, images):
    spec = container_spec("ctr-auto", os.path.join(images, "tf.sqsh"), "auto")
    status, body = service.post("/experiments", spec)
    assert status == 400, body
    assert [f["field"] for f in body["error"]["fields"]] == ["container.runtime"], body


def restarts_alone_then_in_place(service, exp_id, image, runtime):
    """In the same running container (no import again): worker 1's program
    killed -9 comes back alone, on its node and port; then the chief's kill
    -9 ends the attempt, and attempt 2 runs in the same job and restores
    TensorFlow's own latest checkpoint."""
    steps = 600
    spec = container_spec(exp_id, image, runtime, steps,
                          restart={"max_restarts": 1, "on": ["retryable_exit"], "backoff_s": 1})
    status, body = service.post("/experiments", spec)
    if runtime == "oci" and oci_refused_here(service, spec, status, body):
        return
    assert status == 201, body
    wait_for(lambda: (service.experiment(exp_id).get("checkpoint") or {}).get("step", 0) >= 50, 240,
             "a first checkpoint")
    worker = wait_for(lambda: program_pid(exp_id, "worker", 1), 30, "worker 1's program")
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: (lambda p: p if p and p != worker else None)(program_pid(exp_id, "worker", 1)), 90,
             "worker 1's program to start again, alone")
    exp = service.experiment(exp_id)
    assert exp["attempt"] == 1 and any(e["what"] == "restarted_alone" for e in exp["events"]), exp["events"]

    chief = wait_for(lambda: program_pid(exp_id, "chief", 0), 30, "the chief's program")
    os.kill(chief, signal.SIGKILL)
    done = wait_ended(service, exp_id, 420)
    assert done["state"] == "succeeded", done["reason"] + logs_of(service, exp_id)
    first, second = done["attempts"]
    assert first["end_reason"] == "retryable_exit" and "signal 9" in first["reason"], first
    assert second["in_place"] and second["slurm_job_id"] == first["slurm_job_id"], done["attempts"]
    chief_log = task_log(done, proc_of(done, "chief"), attempt=2)
    restored = re.search(r"mnist_tf: restored step=(\d+)", chief_log)
    assert restored and int(restored.group(1)) > 0, chief_log[-2000:]
    assert f"mnist_tf: done step={steps}" in chief_log, chief_log[-2000:]


def test_in_pyxis_a_killed_worker_restarts_alone_and_a_killed_chief_restarts_in_place_from_tfs_checkpoint(
        service, pyxis_cluster, images, tf_imports_dropped_after):
    restarts_alone_then_in_place(service, "ctr-restarts", os.path.join(images, "tf.sqsh"), "pyxis")


def test_in_oci_a_killed_worker_restarts_alone_and_a_killed_chief_restarts_in_place_from_tfs_checkpoint(
        service, pyxis_cluster, images):
    """The same through Slurm's OCI support: runc's container stays, the
    agent in it starts the program again."""
    restarts_alone_then_in_place(service, "ctr-oci-restarts", os.path.join(images, "tf.oci"), "oci")


def in_a_container(pid):
    """Whether process `pid` has a root of its own (a container's), not the host's."""
    theirs, host = os.stat(f"/proc/{pid}/root/"), os.stat("/")
    return (theirs.st_dev, theirs.st_ino) != (host.st_dev, host.st_ino)


def test_in_pyxis_slurms_signal_before_the_time_limit_reaches_the_program(service, pyxis_cluster, images):
    """Slurm's --signal (SIGUSR1, checkpoint.signal_grace_s before the job's
    one-minute limit) reaches the program in its container through pyxis: the
    agent, inside with it, passes it on, and linear_ps writes its checkpoint
    on the signal, as test_restarts' chain of attempts checks outside."""
    from test_restarts import spec as linear_ps_spec
    exp_id = "ctr-signal"
    spec = linear_ps_spec(exp_id, steps=1000, step_sleep=0.4, restart={"max_restarts": 0}, time_limit="1",
                          grace=5)
    spec["container"] = {"image": os.path.join(images, "python.sqsh"), "runtime": "pyxis"}
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    try:
        worker = wait_for(lambda: program_pid(exp_id, "worker", 0), 90, "worker 0's program")
        assert in_a_container(worker), "worker 0's program runs on the host's root"

        def checkpoints_on_the_signal():
            logs = glob.glob(os.path.join(service.output_root, exp_id, "logs", "attempt-1", "*.out"))
            return [int(step) for f in logs for step in re.findall(
                r"checkpoint on signal step=(\d+) signal=SIGUSR1 ", open(f, errors="replace").read())]
        on_signal = wait_for(checkpoints_on_the_signal, 120, "a checkpoint on SIGUSR1")
        assert max(on_signal) > 0, on_signal
    finally:
        service.request("DELETE", f"/experiments/{exp_id}")


def alices_program_runs_as_alice_and_its_files_are_hers(site, image, runtime):
    """tfslurmd as root with --site; alice's job, its agent and her program
    in the image run as alice on the host, and every file the program wrote
    is hers (pyxis: alice inside too, no remapping to root; OCI: inside,
    the root of a user namespace that maps alice alone)."""
    from test_site_mode import owners_under, submit, wait_done
    service, _, _ = site
    service.admin = token_for(service, "root", admin=True)
    alice = pwd.getpwnam(ALICE)
    exp_id = f"ctr-alice-{runtime}"
    record = ('id -u > "$MODEL_DIR/id-$TFSLURM_ROLE"; cat /proc/self/uid_map > "$MODEL_DIR/map-$TFSLURM_ROLE"; '
              'echo written > "$MODEL_DIR/by-$TFSLURM_ROLE"')
    spec = {
        "id": exp_id, "command": ["/bin/sh", "-c", record],
        "cluster": {"worker": 2},
        "resources": {"partition": "debug", "nodes": 2, "tasks_per_node": 1, "time_limit": "00:10:00"},
        "success": "all_workers",
        "container": {"image": image, "runtime": runtime}}
    if runtime == "oci" and slurmctld_release(service) < (23, 2):
        alices = {"Authorization": f"Bearer {token_for(service, ALICE)}"}
        assert oci_refused_here(service, spec, *service.request("POST", "/experiments", spec, alices))
        return
    submit(site, ALICE, spec)
    done = wait_done(service, exp_id, timeout=240)
    assert done["state"] == "succeeded", done.get("reason")
    model_dir = done["model_dir"]
    uid_map = open(os.path.join(model_dir, "map-worker")).read().split()
    if runtime == "oci":
        # runc maps only the owner, as the container's root (docs/containers.md):
        # uid 0 inside is alice outside, and nothing else is mapped.
        assert int(open(os.path.join(model_dir, "id-worker")).read()) == 0
        assert uid_map == ["0", str(alice.pw_uid), "1"], uid_map
    else:
        assert int(open(os.path.join(model_dir, "id-worker")).read()) == alice.pw_uid
        # enroot's user namespace maps alice to herself (no remapping to root).
        assert uid_map == [str(alice.pw_uid), str(alice.pw_uid), "1"], uid_map
    owners = owners_under(os.path.join(service.output_root, exp_id))
    assert "by-worker" in owners, sorted(owners)
    assert {p: uid for p, uid in owners.items() if uid != alice.pw_uid} == {}, owners


def test_site_mode_alices_program_in_pyxis_runs_as_alice_and_its_files_are_hers(site, pyxis_cluster, images):
    alices_program_runs_as_alice_and_its_files_are_hers(site, os.path.join(images, "python.sqsh"), "pyxis")


def test_site_mode_alices_program_in_oci_runs_as_alice_and_its_files_are_hers(site, pyxis_cluster, images):
    """Through Slurm's OCI support: rootless runc as alice, her uid the
    container's root in the bundle tfslurm writes, and alice on the host."""
    alices_program_runs_as_alice_and_its_files_are_hers(site, os.path.join(images, "tf.oci"), "oci")


def logs_of(service, exp_id):
    """The tail of every log of the experiment's attempts, for a failure's message."""
    out = ""
    for f in sorted(glob.glob(os.path.join(service.output_root, exp_id, "logs", "*", "*.out"))):
        out += f"\n===== {f}\n" + open(f, errors="replace").read()[-1500:]
    return out


def test_oci_a_missing_bundle_is_a_startup_error_in_runcs_words_after_one_attempt(service, pyxis_cluster, images):
    spec = container_spec("ctr-oci-missing", "/nonexistent/tf.oci", "oci")
    spec["restart"] = {"max_restarts": 3}
    status, body = service.post("/experiments", spec)
    if oci_refused_here(service, spec, status, body):
        return
    assert status == 201, body
    done = service.wait_state("ctr-oci-missing", "failed", timeout=120)
    assert done["attempt"] == 1, done
    assert "/nonexistent/tf.oci/rootfs: no such file or directory" in done["reason"], \
        done["reason"] + logs_of(service, "ctr-oci-missing")
    assert done["attempts"][-1]["end_reason"] == "startup_error", done["attempts"]
