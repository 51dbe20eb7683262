"""Issue 48: what a new user's first hour tripped on, at the command line.
tfctl runs on a pseudo-terminal (stdout and stderr both), as a person sees
it: a mistyped sweep subcommand is named with the nearest; a YAML error is
pointed at its cause; resuming a running experiment says `tfctl cancel`; a
refused token says which token and where it came from; a sweep is deleted
whole, and a deleted trial shows as deleted. And `tfslurmd --version` on a
host with no Slurm configuration prints what it knows and exits 0."""
import json
import os
import pty
import subprocess
import time

from conftest import BIN, REPO, wait_for
from test_tfctl import TFCTL, home, ok, read_terminal, run_tfctl, tfctl_env  # noqa: F401

TRAIN = os.path.join(REPO, "examples/linear_ps/train.py")


def on_terminal(home, *args, url=None, env=None, timeout=120):
    """(exit code, screen): tfctl with stdout and stderr on one pty."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([TFCTL, *args], env=tfctl_env(home, url, env), stdout=follower, stderr=follower,
                            stdin=subprocess.DEVNULL)
    os.close(follower)
    try:
        screen = read_terminal(leader, proc, timeout)
        code = proc.wait(timeout=30)
    finally:
        proc.kill()
        os.close(leader)
    return code, screen.replace(b"\r\n", b"\n").decode()


def test_a_mistyped_subcommand_of_sweep_or_token_is_named_with_the_nearest(home):
    code, screen = on_terminal(home, "sweep", "stauts", "lr")
    assert code == 2, screen
    assert screen.startswith("tfctl sweep: unknown subcommand 'stauts'; did you mean 'status'?\n"
                             "the subcommands: submit, status, list, cancel, delete (tfctl sweep --help)\n"), screen
    code, screen = on_terminal(home, "sweep")
    assert code == 2 and screen.startswith("tfctl sweep: which? submit, status, list, cancel, delete"), screen
    code, screen = on_terminal(home, "token", "craete")
    assert code == 2 and "unknown subcommand 'craete'; did you mean 'create'?" in screen, screen
    # `sweep delete` is a command now; without an id it says what is missing.
    code, screen = on_terminal(home, "sweep", "delete")
    assert code == 2 and "id is required" in screen and "A subcommand is required" not in screen, screen
    code, screen = on_terminal(home, "sweep", "status", "--help")
    assert code == 0 and "tfctl sweep status lr-sweep" in screen, screen


def test_a_yaml_error_is_pointed_at_its_cause(home, tmp_path):
    cases = {
        # yaml-cpp: "illegal map value" at 3:7
        "tab.yaml": ("id: x\nresources:\n\tnodes: 3\n",
                     "tab.yaml:3:1: a tab in the indentation: YAML indents with spaces only"),
        # yaml-cpp: "end of sequence flow not found" at 3:8
        "bracket.yaml": ("id: x\ncommand: [python3, train.py\ncluster: {worker: 1}\n",
                         "bracket.yaml:2:10: this `[` is never closed: end the list with `]`"),
        "indent.yaml": ("id: x\nresources:\n  nodes: 1\n   tasks_per_node: 1\n",
                        "indent.yaml:4:4: line 4 (`tasks_per_node:`) is indented 3 spaces, more than line 3"),
    }
    for name, (text, said) in cases.items():
        (tmp_path / name).write_text(text)
        code, screen = on_terminal(home, "submit", str(tmp_path / name), url="http://127.0.0.1:9")
        assert code == 1, screen
        assert said in screen, screen
        assert "(YAML parser: " in screen, screen


def test_keys_of_resources_not_indented_under_it_are_said_to_belong_there(service, home, tmp_path):
    spec = tmp_path / "flat.yaml"
    spec.write_text("id: flat\ncommand: [sleep, '1']\ncluster: {worker: 1}\nresources:\n"
                    "partition: debug\nnodes: 1\n")
    code, screen = on_terminal(home, "submit", str(spec), url=service.url)
    assert code == 1, screen
    assert "partition: unknown field here: it is a field of resources (resources.partition); in YAML, " \
        "indent it under `resources:`" in screen, screen
    assert "nodes: unknown field here: it is a field of resources (resources.nodes)" in screen, screen
    assert "resources: must be an object, got null (in YAML, `resources:` with nothing after it" in screen, screen
    assert service.get("/experiments/flat")[0] == 404, "nothing stored"


def test_resuming_a_running_experiment_says_how_to_cancel_it(service, home):
    ok(run_tfctl(home, "submit", "--id", "still-on", "--workers", "1", "--partition", "debug", "--time",
                 "00:10:00", "--", "sleep", "600", url=service.url))
    service.wait_state("still-on", ("running", "starting", "queued"))
    code, screen = on_terminal(home, "resume", "still-on", url=service.url)
    assert code == 1, screen
    assert "cancel it first (tfctl cancel still-on, or DELETE /experiments/still-on)" in screen, screen
    ok(run_tfctl(home, "cancel", "still-on", url=service.url))


def test_a_refused_token_says_which_and_where_it_came_from(service_factory, home):
    svc = service_factory(auth=True)
    bad = "tfs_" + "ab" * 32
    code, screen = on_terminal(home, "list", url=svc.url, env={"TFSLURM_TOKEN": bad})
    assert code == 1, screen
    assert "the token is not valid (tfctl sent the token tfs_abab... from TFSLURM_TOKEN; give another " \
        "with --token, TFSLURM_TOKEN or `token = ...` in ~/.config/tfslurm/config)" in screen, screen
    assert bad not in screen, "the token itself is a secret"
    config = home / ".config" / "tfslurm" / "config"
    config.parent.mkdir(parents=True)
    config.write_text(f"token = {bad}\n")
    code, screen = on_terminal(home, "list", url=svc.url)
    assert code == 1 and f"from {config};" in screen, screen
    code, screen = on_terminal(home, "list", "--token", bad, url=svc.url)
    assert code == 1 and "from --token;" in screen, screen


def test_a_sweep_is_deleted_whole_and_a_deleted_trial_says_so(service, home, tmp_path):
    sweep = {
        "id": "gone",
        "experiment": {
            "command": ["python3", TRAIN, "--steps=10", "--log-every=5", "--checkpoint-every=5",
                        "--step-sleep=0.01"],
            "workdir": os.path.join(REPO, "examples/linear_ps"),
            "cluster": {"ps": 1, "worker": 1},
            "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 2, "time_limit": "00:10:00"},
            "restart": {"max_restarts": 0},
        },
        "parameters": {"arg.--lr": {"values": [0.1, 0.01]}},
        "max_concurrent": 2,
        "objective": {"tag": "loss", "goal": "min"},
    }
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(sweep))
    ok(run_tfctl(home, "sweep", "submit", str(path), url=service.url))
    # Running: refused, with what to do.
    code, screen = on_terminal(home, "sweep", "delete", "gone", url=service.url)
    assert code == 1 and "only an ended sweep can be deleted: cancel it first (tfctl sweep cancel gone)" in screen, \
        screen
    wait_for(lambda: service.get("/sweeps/gone")[1]["state"] == "completed", 150, "the sweep to complete")
    out_dirs = [os.path.join(service.output_root, f"gone-{i}") for i in (1, 2)]
    assert all(os.path.isdir(d) for d in out_dirs)

    # One trial's experiment deleted on its own: the sweep still lists it, as deleted.
    ok(run_tfctl(home, "delete", "gone-1", url=service.url))
    code, screen = on_terminal(home, "sweep", "status", "gone", url=service.url)
    assert code == 0, screen
    row = next(line for line in screen.splitlines() if line.lstrip("* ").startswith("gone-1 "))
    words = row.split()
    assert words[words.index("gone-1") + 1:words.index("gone-1") + 3] == ["deleted", "succeeded"], screen
    # Still the sweep's best (its record stands), as its reason says.
    assert "best: gone-1" in screen, screen

    code, screen = on_terminal(home, "sweep", "delete", "gone", "--files", url=service.url)
    assert code == 0, screen
    assert screen.startswith("deleted sweep gone and 1 trial experiment, with their files ("), screen
    assert service.get("/sweeps/gone")[0] == 404
    assert service.get("/experiments/gone-2")[0] == 404
    assert not os.path.exists(out_dirs[1]), "gone-2's files went with --files"
    assert os.path.isdir(out_dirs[0]), "gone-1 was deleted without --files: its directory stays"
    # The ids are free again.
    ok(run_tfctl(home, "sweep", "submit", str(path), url=service.url))
    ok(run_tfctl(home, "sweep", "cancel", "gone", url=service.url))


def test_tfslurmd_version_without_a_slurm_configuration_says_what_it_knows(slurm_cluster):
    """A build or login host: no SLURM_CONF, no /etc/slurm/slurm.conf, no
    configless slurmd's copy, no DNS. libslurm would end the process
    (fatal: Could not establish a configuration source); tfslurmd prints its
    own version and libslurm's, says why slurmctld was not asked, exits 0."""
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "SLURM_CONF_SERVER")}
    tfslurmd = os.path.join(BIN, "tfslurmd")
    # A mount namespace with nothing in /etc/slurm and /run/slurm, and a
    # network namespace with no DNS server to ask for slurmctld's SRV record.
    script = ("mount -t tmpfs none /etc/slurm 2>/dev/null || true; mkdir -p /run/slurm && "
              "mount -t tmpfs none /run/slurm; exec \"$0\" --version")
    started = time.monotonic()
    r = subprocess.run(["unshare", "--mount", "--net", "sh", "-c", script, tfslurmd], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    took = time.monotonic() - started
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines[0].startswith("tfslurmd ") and "(commit " in lines[0], r.stdout
    assert lines[1].startswith("libslurm "), r.stdout
    assert lines[2].startswith("slurmctld: not asked: this host has no Slurm configuration: libslurm looked "
                               "for $SLURM_CONF, its default slurm.conf, /run/slurm/conf/slurm.conf"), r.stdout
    assert "Could not establish a configuration source" in lines[2], r.stdout
    assert "set SLURM_CONF to the cluster's slurm.conf" in lines[2], r.stdout
    assert "fatal" not in r.stderr, r.stderr
    print(f"tfslurmd --version without a configuration took {took:.1f} s")
    # With the cluster's configuration, slurmctld is asked.
    r = subprocess.run([tfslurmd, "--version"], env=dict(env, SLURM_CONF=slurm_cluster), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 0, r
    assert r.stdout.splitlines()[2].startswith("slurmctld "), r.stdout
