"""Issue 18, part 3: a hang is caught. A real program on the local Slurm
cluster checkpoints (TensorFlow's state file format, which the agent reports),
then stops making progress while its process, and its agent, live on. The
service must end the attempt as stalled within progress.stall_timeout_s plus
one poll, and the restart must resume from the checkpoint."""
import os
import re
import tempfile
import time

from conftest import wait_for
from test_tensorflow import task_log

# Step every 0.2 s, a checkpoint state file per step; in attempt 1 it hangs
# after step 20 (sleeps, alive, heartbeating through its agent), in attempt 2
# it resumes from the checkpoint and finishes at step 40.
PROGRAM = r'''
import os, sys, time
model_dir = os.environ["MODEL_DIR"]
state = os.path.join(model_dir, "checkpoint")
step = 0
if os.path.exists(state):
    step = int(open(state).read().split('"')[1].rsplit("-", 1)[1])
attempt = int(os.environ["TFSLURM_ATTEMPT"])
print(f"stall: attempt={attempt} start_step={step}", flush=True)
while step < 40:
    step += 1
    time.sleep(0.2)
    with open(state + ".tmp", "w") as f:
        f.write(f'model_checkpoint_path: "ckpt-{step}"\n')
    os.replace(state + ".tmp", state)
    if attempt == 1 and step == 20:
        print(f"stall: hanging at step={step} t={time.time():.3f}", flush=True)
        while True:
            time.sleep(3600)
print(f"stall: done step={step}", flush=True)
'''


def test_a_program_that_stops_making_progress_is_stalled_restarted_and_resumes(service):
    d = tempfile.mkdtemp(prefix="tfs-stall-", dir="/tmp")
    program = os.path.join(d, "train.py")
    with open(program, "w") as f:
        f.write(PROGRAM)
    stall_s = 6
    spec = {"id": "stall-1", "command": ["/usr/bin/python3", program], "cluster": {"worker": 1},
            "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 1, "time_limit": "00:10:00"},
            "progress": {"stall_timeout_s": stall_s},
            "restart": {"max_restarts": 1, "on": ["stalled"], "backoff_s": 1}}
    status, body = service.post("/experiments", spec)
    assert status == 201, body

    def stalled_event():
        e = service.experiment("stall-1")
        return next((ev for ev in e["events"] if ev["what"] == "stalled"), None)
    event = wait_for(stalled_event, 120, "the stalled event", interval=0.05)
    seen_at = time.time()
    e = service.experiment("stall-1")
    hung = re.search(r"stall: hanging at step=20 t=([0-9.]+)", task_log(e, 0, attempt=1))
    assert hung, task_log(e, 0, attempt=1)
    detection = seen_at - float(hung.group(1))
    # The agent looks at the checkpoint about once a second, the service's
    # ticker checks timers every 0.2 s: stall_timeout_s plus about 1.2 s.
    assert stall_s <= detection <= stall_s + 2.5, f"detected {detection:.2f} s after the last step"
    assert "the last, step 20" in event["why"] and "1 of 1 tasks still heartbeating: worker:0" in event["why"], event

    done = service.wait_state("stall-1", ("succeeded", "failed"), timeout=120)
    assert done["state"] == "succeeded", done["reason"]
    first, second = done["attempts"]
    assert first["end_reason"] == "stalled", first
    assert second["start_step"] == 20, second
    log2 = task_log(done, 0, attempt=2)
    assert "stall: attempt=2 start_step=20" in log2 and "stall: done step=40" in log2, log2
    print(f"stall-1: detected {detection:.2f} s after the last step (stall_timeout_s {stall_s})")
