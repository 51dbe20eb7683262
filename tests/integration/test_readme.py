"""README.md's tfctl walkthroughs, run as written against a real tfslurmd and
the local Slurm cluster, so that the README cannot drift from what tfctl does.

A walkthrough is the part of README.md between the comments
`<!-- NAME walkthrough: begin ... -->` and `<!-- NAME walkthrough: end -->`:
"tfctl" (the command line), "own script" (Your own training script) and
"python" (the Python package, a notebook's session).
In its ```console blocks a line starting with "$ " is a command and the
lines after it, up to the next command, are what it prints (stdout and
stderr together, as a terminal shows them). A ```python block after the
words "Save this as `PATH`" is a file the reader saves: the test writes it
there when it comes to it. The test runs every command in order, with
bash, starting in the checkout and in the directory the last `cd` left it
in (as one shell would), with HOME a fresh directory, and asserts that each
exits 0 and prints what is shown, where
  - a host:port address stands for any address (the ADDRESS column, TF_CONFIG),
  - a duration ("2.8s", "1m05s") stands for any duration, and a run of
    digits for any number (Slurm job ids, times, memory),
  - a run of spaces stands for any run of spaces (columns widen with numbers),
  - a line "..." stands for any number of lines, and a line ending in "..."
    for any line that starts with what comes before the dots.

The python walkthrough's ```pycon blocks are one Python session: a line
starting with ">>> " begins a statement, "... " continues it, and the lines
after it are what it prints, compared as the console's are. It runs with
the tools venv's python (deploy/install-pytools.sh, which tests/run.sh runs
before the session: PyYAML and pandas, the package's extras) and the
package from the tree (client/python/src), in the checkout, with
TFSLURM_URL and TFSLURM_TOKEN as the tfctl walkthrough exports them.

The walkthrough uses the service deploy/quickstart.sh leaves running: its URL
and token file in the commands, and its output root in what they print, are
replaced with those of this test's tfslurmd, which runs with tokens as the
quickstart's does; `$PWD/build/bin` is replaced with the build under test.
"""
import json
import os
import re
import shlex
import subprocess

import pytest

from conftest import BIN, REPO

README = os.path.join(REPO, "README.md")
QUICKSTART_URL = "http://127.0.0.1:8080"
QUICKSTART_TOKEN_FILE = "/tmp/tfslurm-quickstart/token"
QUICKSTART_OUTPUT_ROOT = "/tmp/tfslurm-quickstart/output"


def walkthrough(name="tfctl"):
    """[(command, [expected output lines]) or (("file", path), [its lines])]
    in README order."""
    begin, end = f"<!-- {name} walkthrough: begin", f"<!-- {name} walkthrough: end -->"
    text = open(README).read()
    assert text.count(begin) == 1 and text.count(end) == 1, f"README.md must mark its {name} walkthrough once"
    section = text[text.index(begin):text.index(end)]
    steps = []
    last = 0
    for block in re.finditer(r"^```(console|python)\n(.*?)^```$", section, re.M | re.S):
        kind, body = block.group(1), block.group(2)
        if kind == "python":
            saved = re.findall(r"Save this as `([^`]+)`", section[last:block.start()])
            assert len(saved) == 1, f"README's {name} walkthrough: a python block that no \"Save this as `PATH`\" names"
            steps.append((("file", saved[0]), body.splitlines(keepends=True)))
        else:
            for line in body.splitlines():
                if line.startswith("$ "):
                    steps.append((line[2:], []))
                else:
                    assert steps and isinstance(steps[-1][0], str), \
                        f"output before the first command in README's {name} walkthrough: {line!r}"
                    steps[-1][1].append(line)
        last = block.end()
    return steps


def normalize(line):
    line = re.sub(r"\b[A-Za-z][\w.-]*:\d+\b", "ADDR", line)
    line = re.sub(r"\b\d+(\.\d+)?[smhd](\d+[smhd])?\b", "DUR", line)
    line = re.sub(r"\d+", "N", line)
    return re.sub(r"\s+", " ", line).strip()


def output_pattern(expected):
    """A regex for the whole normalized output from the README's lines."""
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:.*\n)*?")
        elif line.rstrip().endswith("..."):
            parts.append(re.escape(normalize(line.rstrip()[:-3])) + r".*\n")
        else:
            parts.append(re.escape(normalize(line)) + r"\n")
    return "".join(parts)


def trimmed(lines):
    lines = list(lines)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def test_output_pattern_matches_as_documented():
    pattern = output_pattern(["ID  STATE", "a   running   4.2s ago", "...", "exp b on ..."])
    matches = lambda lines: re.fullmatch(pattern, "".join(normalize(x) + "\n" for x in lines)) is not None
    assert matches(["ID STATE", "a     running 1m05s ago", "exp b on vm: TF_CONFIG"])
    assert matches(["ID STATE", "a running 12s ago", "x", "y", "exp b on node1"])
    assert not matches(["ID STATE", "a failed 1s ago", "exp b on vm"])
    assert not matches(["ID STATE", "a running 1s ago"])
    assert not matches(["ID STATE", "a running 1s ago", "exp c on vm"])


def run_walkthrough(steps, service, tmp_path):
    """Runs `steps` (walkthrough()) against `service`, as one shell would,
    and asserts each command's exit status and output. Returns the final
    environment."""
    token = subprocess.run([os.path.join(BIN, "tfslurmd"), "--db", service.db, "token", "create", "--user",
                            "readme", "--admin"], stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFSLURM_") or k == "TFSLURM_CACERT"}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    cwd = REPO
    cwd_file = tmp_path / "cwd"

    for command, expected in steps:
        if not isinstance(command, str):  # a file the reader saves
            path = os.path.expanduser(command[1].replace("~", str(home), 1))
            assert os.path.isdir(os.path.dirname(path)), f"README says to save {command[1]} in a missing directory"
            with open(path, "w") as f:
                f.write("".join(expected))
            continue
        run = (command.replace(QUICKSTART_URL, service.url).replace(QUICKSTART_TOKEN_FILE, str(token_file))
               .replace("$PWD/build/bin", BIN))
        if run.startswith("export "):
            # Keep what the line exports for the commands after it.
            r = subprocess.run(["bash", "-c", run + "\nenv -0"], env=env, cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=30)
            assert r.returncode == 0, (command, r.stderr)
            env = dict(item.split("=", 1) for item in r.stdout.split("\0") if "=" in item)
            continue
        # The directory the command leaves the shell in is the next one's.
        script = f'{run}\nrc=$?\npwd -P > {shlex.quote(str(cwd_file))}\nexit $rc'
        r = subprocess.run(["bash", "-o", "pipefail", "-c", script], env=env, cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
        cwd = cwd_file.read_text().strip() or cwd
        if os.environ.get("TFSLURM_WALKTHROUGH_LOG"):  # the transcript, for a closing note
            with open(os.environ["TFSLURM_WALKTHROUGH_LOG"], "a") as log:
                log.write(f"$ {command}\n{r.stdout}")
        actual = trimmed(r.stdout.splitlines())
        shown = "\n".join(["README shows:", *expected, "tfctl printed:", *actual])
        assert r.returncode == 0, f"`{command}` exited {r.returncode}\n{shown}"
        expected = [line.replace(QUICKSTART_OUTPUT_ROOT, service.output_root) for line in trimmed(expected)]
        normalized = "".join(normalize(line) + "\n" for line in actual)
        assert re.fullmatch(output_pattern(expected), normalized), \
            f"`{command}` did not print what README.md shows\n{shown}"
    return env


def test_readme_tfctl_walkthrough_works_as_shown(service_factory, tmp_path):
    steps = walkthrough()
    commands = [c for c, _ in steps]
    # What the issue asks the section to show.
    for needed in ["tfctl submit ", "--wait", "tfctl status ", "tfctl logs ", "--task", "tfctl list",
                   "tfctl events ", "tfctl resume ", "tfctl cancel ", "TFSLURM_URL=", "TFSLURM_TOKEN="]:
        assert any(needed in c for c in commands), f"README's tfctl walkthrough has no `{needed}`"

    service = service_factory(auth=True)  # as deploy/quickstart.sh runs it: with tokens
    env = run_walkthrough(steps, service, tmp_path)
    assert "TFSLURM_TOKEN" in env and env["TFSLURM_URL"] == service.url


def test_readme_own_training_script_works_as_shown(service_factory, tmp_path):
    steps = walkthrough("own script")
    commands = [c for c, _ in steps if isinstance(c, str)]
    files = [c[1] for c, _ in steps if not isinstance(c, str)]
    # What issue 30 asks of the section: a script of one's own, from nothing,
    # submitted from its folder by a relative name, watched, then resumed.
    assert files == ["~/myproj/train.py"], files
    script = "".join(next(lines for c, lines in steps if not isinstance(c, str)))
    for needed in ["TF_CONFIG", "MODEL_DIR", "checkpoint"]:
        assert needed in script, f"README's train.py does not use {needed}"
    for needed in ["cd ~/myproj", "tfctl submit ", "-- python3 train.py", "--wait", "tfctl logs ", "tfctl status ",
                   "tfctl resume ", "tfctl delete "]:
        assert any(needed in c for c in commands), f"README's own-script walkthrough has no `{needed}`"

    service = service_factory(auth=True)
    # "With the exports above": the command line walkthrough's.
    exports = [(c, out) for c, out in walkthrough() if c.startswith("export ")]
    run_walkthrough(exports + steps, service, tmp_path)
    # (Its output shows the relative train.py found in ~/myproj, and the
    # resumed attempt going on from step 200.) Deleted with its files: the id
    # is free, so the walkthrough runs again as written.
    status, _ = service.request("GET", "/experiments/mine-1", None,
                                {"Authorization": f"Bearer {(tmp_path / 'token').read_text().strip()}"})
    assert status == 404
    assert not os.path.lexists(os.path.join(service.output_root, "mine-1"))


def pycon_walkthrough(name="python"):
    """[(statement, [expected output lines])] of the walkthrough's ```pycon blocks."""
    begin, end = f"<!-- {name} walkthrough: begin", f"<!-- {name} walkthrough: end -->"
    text = open(README).read()
    assert text.count(begin) == 1 and text.count(end) == 1, f"README.md must mark its {name} walkthrough once"
    section = text[text.index(begin):text.index(end)]
    steps = []
    for block in re.finditer(r"^```pycon\n(.*?)^```$", section, re.M | re.S):
        for line in block.group(1).splitlines():
            if line.startswith(">>> "):
                steps.append([line[4:], []])
            elif line.startswith("... ") and steps and not steps[-1][1]:
                steps[-1][0] += "\n" + line[4:]
            else:
                assert steps, f"output before the first statement in README's {name} walkthrough: {line!r}"
                steps[-1][1].append(line)
    return [(source + "\n", lines) for source, lines in steps]


def test_pycon_walkthrough_reads_statements_and_their_output():
    steps = pycon_walkthrough()
    sources = [s for s, _ in steps]
    # What the issue asks the example to show: submit, watch the loss, resume
    # with a longer time limit, compare two runs.
    for needed in ["tfslurm.Client()", ".submit(", 'tag="loss"', "time_limit=", ".resume(", "compare("]:
        assert any(needed in s for s in sources), f"README's python walkthrough has no `{needed}`"
    assert any(s.count("\n") > 1 for s in sources), "a statement continued with '... ' is one statement"


def test_readme_python_walkthrough_works_as_shown(service_factory, tmp_path):
    steps = pycon_walkthrough()
    service = service_factory(auth=True)  # as deploy/quickstart.sh runs it: with tokens
    token = subprocess.run([os.path.join(BIN, "tfslurmd"), "--db", service.db, "token", "create", "--user",
                            "readme", "--admin"], stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    # Made before the session (tests/run.sh): the session runs on the
    # cluster's service host, whose network reaches no package index.
    python = os.environ.get("TFSLURM_PYTOOLS_PYTHON", "/opt/tfslurm/venv-pytools/bin/python")
    if not os.path.exists(python):
        pytest.fail(f"no tools python at {python}: run deploy/install-pytools.sh (tests/run.sh does) "
                    "and set TFSLURM_PYTOOLS_PYTHON to the path it prints")
    home = tmp_path / "home"
    home.mkdir()
    statements = tmp_path / "statements.json"
    statements.write_text(json.dumps([source for source, _ in steps]))
    mark = "@@README-STATEMENT-END@@"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFSLURM_") or k == "TFSLURM_CACERT"}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), TFSLURM_URL=service.url,
               TFSLURM_TOKEN=token, PYTHONPATH=os.path.join(REPO, "client", "python", "src"))
    r = subprocess.run([python, os.path.join(os.path.dirname(__file__), "helpers", "pycon_session.py"),
                        str(statements), mark], env=env, cwd=REPO, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=900)
    if os.environ.get("TFSLURM_WALKTHROUGH_LOG"):  # the transcript, for a closing note
        with open(os.environ["TFSLURM_WALKTHROUGH_LOG"], "a") as log:
            log.write(r.stdout)
    outputs = re.split(rf"\n?{re.escape(mark)} \d+\n", r.stdout)
    assert r.returncode == 0 and len(outputs) == len(steps) + 1, r.stdout[-5000:]
    for (source, expected), printed in zip(steps, outputs):
        actual = trimmed(printed.splitlines())
        shown = "\n".join(["README shows:", *expected, "Python printed:", *actual])
        assert "Traceback (most recent call last)" not in printed, f"`{source.strip()}` raised\n{shown}"
        normalized = "".join(normalize(line) + "\n" for line in actual)
        assert re.fullmatch(output_pattern(trimmed(expected)), normalized), \
            f"`{source.strip()}` did not print what README.md shows\n{shown}"


def test_every_page_the_tree_cites_exists():
    """A doc a script or a source names must be there (deploy/install-deps.sh
    once cited a page of PyTorch notes in docs/ that was never written)."""
    cited = set()
    for top in ("README.md", "deploy", "docs", "schema", "service", "agent", "client", "web", "bench", "tests",
                "examples", "base", "CMakeLists.txt"):
        root = os.path.join(REPO, top)
        paths = [root] if os.path.isfile(root) else [os.path.join(d, f) for d, _, fs in os.walk(root)
                                                      if "node_modules" not in d for f in fs]
        for path in paths:
            if not path.endswith((".md", ".sh", ".py", ".cc", ".h", ".js", ".mjs", ".yaml", ".txt", ".in")):
                continue
            for m in re.finditer(r"\b((?:docs|schema)/[A-Za-z0-9_-]+\.md)\b", open(path, errors="replace").read()):
                cited.add((m.group(1), os.path.relpath(path, REPO)))
    assert len(cited) > 20, "the check finds the citations"
    missing = sorted(f"{doc} (cited in {where})" for doc, where in cited if not os.path.exists(os.path.join(REPO, doc)))
    assert not missing, missing


def test_readme_quotes_the_reason_a_mistyped_script_gives(service, tmp_path):
    """The README's own usage is `python3 train.py`; its example of a
    program that cannot start is that usage with a typo, and the reason it
    quotes is the one tfslurm gives for it."""
    text = " ".join(open(README).read().split())
    quoted = re.search(r"the dashboard: `\.\.\. (exited with code \d+: [^`]+)`", text)
    assert quoted, "README quotes the reason of a program that cannot start"
    proj = tmp_path / "myproj"
    proj.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(proj, 0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFSLURM_") or k == "TFSLURM_CACERT"}
    env.update(HOME=str(home), TFSLURM_URL=service.url)
    r = subprocess.run([os.path.join(BIN, "tfctl"), "submit", "--id", "readme-typo", "--workers", "1", "--partition",
                        "debug", "--time", "00:10:00", "--wait", "--", "python3", "trian.py"], cwd=proj, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert r.returncode == 1, r.stdout
    reason = service.experiment("readme-typo")["reason"]
    # Python names itself by its own path (Debian's /usr/bin/python3, a venv's,
    # pyenv's), and the directory is this test's.
    said = re.sub(r"\S*/python3[0-9.]*: can't open file", "/usr/bin/python3: can't open file",
                  reason.replace(str(proj), "/home/alice/myproj"))
    assert quoted.group(1) in said, f"README quotes `{quoted.group(1)}`; tfslurm said `{reason}`"
