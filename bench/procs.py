"""Finding the benchmarks' training programs on this machine by their
environment, as tests/integration/conftest.py's programs() does: the agent
gives each program EXPERIMENT_ID, TFSLURM_ROLE, TFSLURM_ATTEMPT and the rest."""
import os


def programs(want, command_part):
    """The pids of the processes whose environment holds every NAME=value of
    `want` and whose command line contains `command_part` (the program's
    file, so that the agent, with the same environment names, is left out)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = set(f.read().decode(errors="replace").split("\0"))
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if set(want) <= env and command_part in cmd:
            found.append(int(pid))
    return found
