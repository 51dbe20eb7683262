"""Issue 17: a small chaos soak (bench/soak.py) on the local Slurm cluster:
three experiments, four tfslurmd kills and every other kind of fault, from a
fixed seed; nothing may be lost, duplicated or left running. Once every kind
of fault has been made the experiments still open are cancelled, so the
soak's length is its faults', not its training's. The full soak is
bench/soak.sh."""
import os
import subprocess
import sys

from conftest import BIN, REPO, slurm_env, wait_for


def test_small_chaos_soak_loses_nothing(slurm_cluster, tmp_path):
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "bench/soak.py"), "--slurm-conf", slurm_cluster, "--bin", BIN,
         "--experiments", "3", "--daemon-kills", "4", "--seed", "1", "--steps", "6000", "--fault-interval", "2",
         "--deadline", "420", "--require-every-fault", "--cancel-when-every-fault-made",
         "--workdir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    print(out.stdout)
    assert out.returncode == 0, out.stdout[-4000:]
    assert "soak: PASS: 3 experiments" in out.stdout
    assert "| lost experiments | 0 |" in out.stdout
    assert "| attempts with more than one Slurm job | 0 |" in out.stdout
    assert "| stray tasks (processes) left | 0 |" in out.stdout
    assert "| PRAGMA integrity_check | ok |" in out.stdout
    # The node failure is over for the tests that come after: every node is
    # back in service.
    wait_for(lambda: (lambda s: s if sorted(s.split()) == ["idle"] * 3 else None)(subprocess.run(
        ["sinfo", "-h", "-N", "-p", "debug", "-o", "%T"], env=slurm_env(slurm_cluster), stdout=subprocess.PIPE,
        text=True).stdout), 120, "every node to be idle again")
