"""Issue 18, part 5: Prometheus /metrics from a real tfslurmd that ran a real
experiment on the local Slurm cluster, parsed as Prometheus reads the text
format (one sample per line: name{labels} value)."""
import re

from conftest import wait_for
from test_security import token

# The ps waits, as parameter servers do, until it is reaped.
HELLO = {"command": ["/bin/sh", "-c", 'if [ "$TFSLURM_ROLE" = ps ]; then exec sleep 600; fi; echo hello'],
         "cluster": {"ps": 1, "worker": 2},
         "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 1, "time_limit": "00:05:00"},
         "restart": {"max_restarts": 0}}
# Label values are quoted strings, which may hold braces ("/experiments/{id}").
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})? (\S+)$')


def scrape(service, headers=None):
    status, text = service.request("GET", "/metrics", headers=headers, raw=True)
    assert status == 200, text
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line of the text format: {line!r}"
        samples[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return text, samples


def test_metrics_count_what_an_experiment_did(service):
    status, body = service.post("/experiments", dict(HELLO, id="metrics-hello"))
    assert status == 201, body
    done = service.wait_state("metrics-hello", ("succeeded", "failed"), timeout=120)
    assert done["state"] == "succeeded", done["reason"]
    # The ps is reaped after the workers' success, and a poll of Slurm sees
    # the job end.
    wait_for(lambda: (lambda e: all(t["state"] != "running" for t in e["tasks"])
                      and e["attempts"][0]["state"] == "ended")(service.experiment("metrics-hello")),
             60, "the ps to be reaped and the job to end")
    text, s = scrape(service)
    assert "# TYPE tfslurm_rendezvous_seconds histogram" in text
    assert s["tfslurm_registrations_total"] == 3, s
    # From srun's launch (the job script's TFSLURM_STEP_LAUNCHED_AT_MS) to
    # each agent's start; no container, so none started.
    assert s['tfslurm_task_start_seconds_count{runtime="none"}'] == 3, s
    assert 0 <= s['tfslurm_task_start_seconds_sum{runtime="none"}'] < 60, s
    assert not any(k.startswith("tfslurm_container_starts_total") for k in s), s
    assert s['tfslurm_experiments{state="succeeded"}'] == 1, s
    assert s['tfslurm_experiments{state="running"}'] == 0, s
    assert s['tfslurm_attempts_ended_total{end_reason="succeeded"}'] == 1, s
    assert s["tfslurm_rendezvous_seconds_count"] == 1, s
    assert 0 < s["tfslurm_rendezvous_seconds_sum"] < 120, s
    assert s["tfslurm_reaping_seconds_count"] == 1, s
    assert s["tfslurm_slurm_poll_seconds_count"] >= 1, s
    assert s["tfslurm_slurm_poll_errors_total"] == 0, s
    assert s["tfslurm_agents_connected"] == 0, s  # every agent has ended
    # The GETs above, by route template (never the experiment's id) and code.
    assert s['tfslurm_http_request_duration_seconds_count{code="200",route="GET /experiments/{id}"}'] >= 1, s
    assert s['tfslurm_http_request_duration_seconds_count{code="201",route="POST /experiments"}'] == 1, s
    assert "metrics-hello" not in text


def test_metrics_need_a_token_like_every_route(service_factory):
    service = service_factory(auth=True)
    status, body = service.request("GET", "/metrics")
    assert status == 401, body
    status, _ = service.request("GET", "/metrics", headers={"Authorization": "Bearer nope"}, raw=True)
    assert status == 401
    tok = token(service, "prometheus")
    _, s = scrape(service, {"Authorization": f"Bearer {tok}"})
    assert s['tfslurm_http_request_duration_seconds_count{code="401",route="GET /metrics"}'] == 2, s
