"""Writes this task's argv, its HOSTILE_* environment and cwd as JSON to
$MODEL_DIR/argv-<TFSLURM_ROLE>-<TFSLURM_INDEX>.json, for byte-for-byte checks."""
import json
import os
import sys

path = os.path.join(os.environ["MODEL_DIR"], f"argv-{os.environ['TFSLURM_ROLE']}-{os.environ['TFSLURM_INDEX']}.json")
with open(path, "w") as f:
    json.dump({"argv": sys.argv[1:],
               "env": {k: v for k, v in os.environ.items() if k.startswith("HOSTILE_")},
               "cwd": os.getcwd()}, f)
