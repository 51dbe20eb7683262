"""Issue 17: a small chaos soak (bench/soak.py) on the local Slurm cluster:
three experiments, four tfslurmd kills and every other kind of fault, from a
fixed seed; nothing may be lost, duplicated or left running. Once every kind
of fault has been made the experiments still open are cancelled, so the
soak's length is its faults', not its training's; until then an experiment
that ends (a network fault at a task's launch ends it start_failed, after
the barrier's 60 s here) is replaced by a new one, so the faults always have
something to hit. On a cluster whose slurmd run in mount namespaces of
their own (start.sh --containers, as CI's) it makes no full-disk faults: its
tmpfs would not reach them. The full soak is bench/soak.sh."""
import os
import re
import signal
import subprocess
import sys

from conftest import BIN, REPO, slurm_env, wait_for


def test_small_chaos_soak_loses_nothing(slurm_cluster, tmp_path):
    # Its own session: past the time allowed, SIGTERM ends the soak through
    # its cleanup (its tfslurmd stopped, its jobs cancelled, the nodes back),
    # then SIGKILL ends whatever is left of its group. (subprocess.run's
    # timeout killed soak.py alone, and its tfslurmd went on submitting
    # attempts on the cluster the next tests ran on.)
    proc = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "bench/soak.py"), "--slurm-conf", slurm_cluster, "--bin", BIN,
         "--experiments", "3", "--daemon-kills", "4", "--seed", "1", "--steps", "6000", "--fault-interval", "2",
         "--deadline", "420", "--require-every-fault", "--cancel-when-every-fault-made",
         "--keep-open", "--barrier-timeout-s", "60", "--workdir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        stdout, _ = proc.communicate(timeout=720)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            stdout, _ = proc.communicate(timeout=180)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        stdout = (stdout or "") + "\n(the soak ran past 720 s and was stopped)"
    out = subprocess.CompletedProcess(proc.args, proc.returncode, stdout)
    print(out.stdout)
    assert out.returncode == 0, out.stdout[-4000:]
    assert re.search(r"soak: PASS: [3-9] experiments", out.stdout), out.stdout[-4000:]
    assert "| lost experiments | 0 |" in out.stdout
    assert "| attempts with more than one Slurm job | 0 |" in out.stdout
    assert "| stray tasks (processes) left | 0 |" in out.stdout
    assert "| PRAGMA integrity_check | ok |" in out.stdout
    # The node failure is over for the tests that come after: every node is
    # back in service.
    def nodes(fields):
        return subprocess.run(["sinfo", "-h", "-N", "-p", "debug", "-o", fields], env=slurm_env(slurm_cluster),
                              stdout=subprocess.PIPE, text=True).stdout

    try:
        wait_for(lambda: sorted(nodes("%T").split()) == ["idle"] * 3, 120, "every node to be idle again")
    except AssertionError as e:
        raise AssertionError(f"{e}; the nodes (name, state, reason):\n{nodes('%N %T %E')}") from e
