"""Runs the statements of a README ```pycon block as one interactive Python
session would (tests/integration/test_readme.py): each statement compiled in
"single" mode, so that an expression's value is printed as the prompt
prints it, stderr into stdout as a terminal shows them, a traceback printed
and the session going on. After each statement a line MARK N tells where its
output ends.

    python pycon_session.py STATEMENTS.json MARK
"""
import json
import sys
import traceback

statements = json.load(open(sys.argv[1]))
mark = sys.argv[2]
sys.stderr = sys.stdout
namespace = {"__name__": "__main__"}
for i, source in enumerate(statements):
    try:
        exec(compile(source, f"<README statement {i + 1}>", "single"), namespace)
    except Exception:  # shown, as the prompt shows it; the test compares
        traceback.print_exc(file=sys.stdout)
    sys.stdout.write(f"\n{mark} {i}\n")
    sys.stdout.flush()
