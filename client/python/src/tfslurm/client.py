"""The client of tfslurmd's REST API (schema/openapi.yaml): one method per
call, answers as the dataclasses of types.py, errors as the exceptions of
errors.py.

    client = tfslurm.Client()                # TFSLURM_URL, TFSLURM_TOKEN, ~/.config/tfslurm/config
    exp = client.submit("experiment.yaml")   # or a dict, or an ExperimentSpec
    exp.wait(tag="loss")                     # events as they come, the loss live
    exp.metrics().to_dataframe()

A Client may be used from several threads: GET requests keep one
connection per thread, other requests open their own.
"""

from __future__ import annotations

import time
from typing import IO, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import _text
from . import progress as _progress
from ._http import READ_TIMEOUT_S, Query, Transport, encode_path
from .connection import Connection, resolve_connection
from .errors import ExperimentFailed, ServiceUnreachable, Unavailable, WaitTimeout
from .spec import SpecLike, as_spec_dict, changes_patch
from .types import (CreatedToken, Deleted, DryRun, Event, Experiment, ExperimentList, Metrics,
                    Sweep, SweepSummary, Version, from_json)

# How long a resume or a delete right after an experiment's end waits for its
# Slurm job to leave (the service answers 503 meanwhile), as tfctl does.
FINISHING_WAIT_S = 60.0
POLL_INTERVAL_S = 1.0
# wait(): how long the service may stay unreachable (restarting) before the
# wait gives up; its state survives a restart.
UNREACHABLE_LIMIT_S = 60.0


class Client:
    """A connection to one tfslurmd.

    url, token: as tfctl finds them when not given (connection.py): the
    environment (TFSLURM_URL, TFSLURM_TOKEN), then ~/.config/tfslurm/config;
    with no token at all, a MUNGE credential per request.
    cacert: a CA file to verify an https:// service with.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 cacert: Optional[str] = None, munge_socket: Optional[str] = None,
                 config_path: Optional[str] = None, timeout: float = READ_TIMEOUT_S) -> None:
        self.connection: Connection = resolve_connection(
            url, token, cacert=cacert, munge_socket=munge_socket, config_path=config_path)
        self._http = Transport(self.connection, timeout)

    def __repr__(self) -> str:
        return f"Client(url={self.connection.url!r})"

    @property
    def url(self) -> str:
        return self.connection.url

    # ------------------------------------------------------------ plumbing

    def request_json(self, method: str, path: str, body: Any = None,
                     query: Optional[Dict[str, Any]] = None) -> Any:
        """Any route, as JSON: for what this client has no method for yet."""
        return self._http.json(method, path, body, query=query)

    def _experiment(self, doc: Any) -> Experiment:
        e = from_json(Experiment, doc)
        e._client = self
        return e

    def _sweep(self, doc: Any) -> Sweep:
        s = from_json(Sweep, doc)
        s._client = self
        return s

    def _retrying_finishing(self, call: Callable[[], Any], retry_for: float) -> Any:
        """call(), again while the service answers 503 "its Slurm job is still finishing"."""
        deadline = time.monotonic() + retry_for
        while True:
            try:
                return call()
            except Unavailable:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)

    # ------------------------------------------------------------ experiments

    def submit(self, spec: SpecLike, *, id: Optional[str] = None) -> Experiment:
        """Submit an experiment: a spec file's path (YAML or JSON), a dict or
        an ExperimentSpec. `id` replaces the spec's. Answers it queued, its
        first attempt submitted to Slurm; InvalidArgument names every bad
        field, and nothing is stored."""
        body = as_spec_dict(spec)
        if id is not None:
            body["id"] = id
        return self._experiment(self._http.json("POST", "/experiments", body))

    def dry_run(self, spec: SpecLike, *, id: Optional[str] = None) -> DryRun:
        """Check a spec and render its sbatch script; nothing is stored or submitted."""
        body = as_spec_dict(spec)
        if id is not None:
            body["id"] = id
        return from_json(DryRun, self._http.json("POST", "/experiments", body,
                                                 query={"dry_run": "true"}))

    def get(self, id: str, *, task_state: Optional[str] = None, tasks_offset: int = 0,
            tasks_limit: Optional[int] = None) -> Experiment:
        """The experiment with its spec, attempts, tasks and newest 500 events.

        `tasks` holds every task of the current attempt, or the page that
        `task_state`, `tasks_offset` and `tasks_limit` ask for (an experiment
        of 16,384 tasks is about 4 MB of them); `tasks_total` counts the
        tasks `task_state` keeps, and `task_counts` counts every task.
        """
        query: Query = {"task_state": task_state, "tasks_offset": tasks_offset or None,
                        "tasks_limit": tasks_limit}
        return self._experiment(
            self._http.json("GET", encode_path("experiments", id), query=query))

    def list(self, state: Union[str, Sequence[str], None] = None, *, owner: Optional[str] = None,
             limit: int = 50, offset: int = 0) -> ExperimentList:
        """A page of experiments, newest first; `state` keeps only those states."""
        states = [state] if isinstance(state, str) else list(state or [])
        doc = self._http.json("GET", "/experiments", query={
            "state": ",".join(states) or None, "owner": owner, "limit": limit, "offset": offset})
        page = from_json(ExperimentList, doc)
        for e in page.experiments:
            e._client = self
        return page

    def cancel(self, id: str) -> Experiment:
        """Cancel the experiment and its Slurm job."""
        return self._experiment(self._http.json("DELETE", encode_path("experiments", id)))

    def resume(self, id: str, changes: Optional[Mapping[str, Any]] = None, *,
               command: Optional[Sequence[str]] = None, time_limit: Optional[str] = None,
               env: Optional[Mapping[str, Optional[str]]] = None,
               set: Optional[Mapping[str, Any]] = None,
               retry_for: float = FINISHING_WAIT_S) -> Experiment:
        """Start a new attempt of an ended experiment from its latest checkpoint.

        What to change for it and the attempts after it: `command`,
        `time_limit`, `env` (None unsets a variable), `set` (dotted fields,
        as tfctl's --set: {"restart.max_restarts": 5}), or `changes`, a JSON
        merge patch on the spec; the service refuses a change the checkpoint
        depends on, naming the field. Right after the end, while the Slurm
        job is still finishing, it waits up to `retry_for` seconds."""
        patch: Dict[str, Any] = dict(changes or {})
        if set:
            patch = _merge(patch, changes_patch(set))
        if command is not None:
            patch["command"] = list(command)
        if time_limit is not None:
            patch = _merge(patch, {"resources": {"time_limit": time_limit}})
        if env is not None:
            patch = _merge(patch, {"env": dict(env)})
        body = {"changes": patch} if patch else {}
        path = encode_path("experiments", id) + "/resume"
        return self._experiment(self._retrying_finishing(
            lambda: self._http.json("POST", path, body), retry_for))

    def delete(self, id: str, *, files: bool = False, retry_for: float = FINISHING_WAIT_S
               ) -> Deleted:
        """Remove an ended experiment; with `files`, its directory too. Right
        after the end it waits for the Slurm job to leave, as tfctl does."""
        path = encode_path("experiments", id) + "/delete"
        doc = self._retrying_finishing(
            lambda: self._http.json("POST", path, {}, query={"files": files or None}), retry_for)
        return from_json(Deleted, doc)

    def sbatch(self, id: str, attempt: Optional[int] = None) -> str:
        """The sbatch script of an attempt (default the latest), as submitted."""
        text, _ = self._http.text(encode_path("experiments", id, "sbatch"),
                                  query={"attempt": attempt})
        return text

    def metrics(self, id: str, tags: Optional[Sequence[str]] = None) -> Metrics:
        """The experiment's training scalars (every tag, or only `tags`)."""
        doc = self._http.json("GET", encode_path("experiments", id, "metrics"),
                              query={"tag": list(tags) if tags else None})
        return from_json(Metrics, doc)

    def compare(self, experiments: Sequence[Union[str, Experiment]], tag: str) -> Any:
        """`tag` of several experiments side by side, a pandas DataFrame indexed
        by step with a column per experiment (needs pandas)."""
        from ._frames import compare_frame
        ids = [e if isinstance(e, str) else e.id for e in experiments]
        return compare_frame([self.metrics(i, [tag]) for i in ids], tag)

    # ------------------------------------------------------------ logs

    def logs(self, id: str, task: Optional[str] = None, *, attempt: Optional[int] = None,
             tail: Optional[int] = None) -> str:
        """What a task (`ROLE:INDEX`, e.g. "worker:0", "rank:3") wrote, or
        without `task` the batch script's output; as written (nothing escaped)."""
        text, _ = self._http.text(encode_path("experiments", id, "logs"),
                                  query={"task": task, "attempt": attempt, "tail": tail})
        return text

    def follow_logs(self, id: str, task: Optional[str] = None, *,
                    attempt: Optional[int] = None) -> Iterator[str]:
        """The task's output as it is written, in pieces, until its attempt's
        job has ended (as ``tfctl logs -f``). Text as written: escape it
        before printing it on a terminal (print_logs does)."""
        import codecs
        decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")
        path = encode_path("experiments", id, "logs")
        offset = 0
        while True:
            # The service ends each follow response after 30 s, or when the
            # attempt's job has ended; the next one goes on from the offset.
            received = 0
            with self._http.stream(path, {"task": task, "attempt": attempt, "offset": offset,
                                          "follow": "true"}) as response:
                start = int(response.getheader("X-Tfslurm-Log-Offset") or offset)
                while True:
                    chunk = response.read1(65536)
                    if not chunk:
                        break
                    received += len(chunk)
                    text = decoder.decode(chunk)
                    if text:
                        yield text
            offset = start + received
            if received == 0:
                if self._attempt_ended(id, attempt):
                    break
                time.sleep(POLL_INTERVAL_S)
        rest = decoder.decode(b"", final=True)
        if rest:
            yield rest

    def _attempt_ended(self, id: str, attempt: Optional[int]) -> bool:
        e = self.get(id)
        number = attempt or e.attempt
        a = next((a for a in e.attempts if a.number == number), None)
        return a is None or a.state == "ended" or (e.finished and attempt is None)

    def print_logs(self, id: str, task: Optional[str] = None, *, follow: bool = False,
                   attempt: Optional[int] = None, out: Optional[IO[str]] = None) -> None:
        """Print a task's output, escaped for a terminal; `follow` as tfctl logs -f."""
        import sys
        from . import _text
        stream = out if out is not None else sys.stdout
        pieces: Iterator[str] = (self.follow_logs(id, task, attempt=attempt) if follow
                                 else iter([self.logs(id, task, attempt=attempt)]))
        for piece in pieces:
            stream.write(_text.escape(piece, keep_line_breaks=True))
            stream.flush()

    # ------------------------------------------------------------ waiting

    def wait(self, id: str, *, timeout: Optional[float] = None, progress: Optional[bool] = None,
             tag: Optional[str] = None, check: bool = False,
             on_event: Optional[Callable[[Event], None]] = None,
             after_event: Optional[int] = None, out: Optional[IO[str]] = None) -> Experiment:
        """Follow an experiment until it has ended; answers it as it ended.

        progress: None shows events and a status line where this runs (a
        notebook, a terminal, else plain lines on stderr); False nothing.
        tag: a training scalar (e.g. "loss") whose newest value the status
        line shows. check: raise ExperimentFailed unless it succeeded.
        on_event: called with each new event. after_event: events up to this
        id are not shown (default: those of the attempts before the current
        one, so that waiting for a resumed experiment shows its new attempt,
        and one just submitted all of its history). timeout: seconds, then
        WaitTimeout (the experiment goes on). Rides out a restart of the
        service for a minute; a KeyboardInterrupt leaves the experiment
        running."""
        display = _progress.choose(progress, out)
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        seen = after_event
        unreachable_since: Optional[float] = None
        last_scalar_at = 0.0
        scalar_value = None
        try:
            while True:
                try:
                    e = self.get(id)
                except ServiceUnreachable:  # no answer: the service may be restarting
                    now = time.monotonic()
                    unreachable_since = unreachable_since or now
                    if now - unreachable_since > UNREACHABLE_LIMIT_S:
                        raise
                else:
                    unreachable_since = None
                    if seen is None:
                        seen = max((ev.id for ev in e.events if ev.attempt < e.attempt), default=0)
                    for event in e.events:
                        if event.id <= seen:
                            continue
                        seen = event.id
                        display.event(_progress.format_event(event))
                        if on_event is not None:
                            on_event(event)
                    if tag and (e.finished or time.monotonic() - last_scalar_at >= 5.0):
                        last_scalar_at = time.monotonic()
                        scalar_value = self.metrics(id, [tag]).last(tag)
                    display.status(_progress.status_line(e, tag, scalar_value, started))
                    if e.finished:
                        if check and not e.succeeded:
                            raise ExperimentFailed(f"{e.id} {e.state}: {e.reason}", e)
                        return e
                if deadline is not None and time.monotonic() >= deadline:
                    raise WaitTimeout(f"{id} has not ended after {timeout} s; it goes on")
                time.sleep(POLL_INTERVAL_S)
        finally:
            display.close()

    # ------------------------------------------------------------ sweeps

    def submit_sweep(self, spec: Union[str, Mapping[str, Any]]) -> Sweep:
        """Submit a sweep (schema/sweep-spec.md): a spec file's path or a dict,
        whose `experiment` may be an ExperimentSpec. Every trial is checked
        first; InvalidArgument names every bad field, and nothing is stored."""
        return self._sweep(self._http.json("POST", "/sweeps", as_spec_dict(spec)))

    def sweep(self, id: str) -> Sweep:
        """A sweep's status: its trials, their objectives and the best trial."""
        return self._sweep(self._http.json("GET", encode_path("sweeps", id)))

    def sweeps(self) -> List[SweepSummary]:
        """Your sweeps (an admin's: everyone's), newest first."""
        out = []
        for doc in self._http.json("GET", "/sweeps").get("sweeps", []):
            s = from_json(SweepSummary, doc)
            s._client = self
            out.append(s)
        return out

    def cancel_sweep(self, id: str) -> Sweep:
        """Cancel a sweep and its running trials."""
        return self._sweep(self._http.json("POST", encode_path("sweeps", id) + "/cancel", {}))

    def wait_sweep(self, id: str, *, timeout: Optional[float] = None,
                   progress: Optional[bool] = None, out: Optional[IO[str]] = None) -> Sweep:
        """Follow a sweep until it has completed or been cancelled."""
        display = _progress.choose(progress, out)
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        states: Dict[int, str] = {}
        try:
            while True:
                s = self.sweep(id)
                for t in s.trials:
                    now = f"{t.state} {t.experiment_state or ''} {t.end_reason}".strip()
                    if states.get(t.index) != now:
                        states[t.index] = now
                        display.event(_text.escape(
                            f"{t.experiment_id}: {now}" + (f" ({t.note})" if t.note else "")))
                display.status(_progress.sweep_status_line(s, started))
                if s.finished:
                    return s
                if deadline is not None and time.monotonic() >= deadline:
                    raise WaitTimeout(f"sweep {id} has not ended after {timeout} s; it goes on")
                time.sleep(POLL_INTERVAL_S)
        finally:
            display.close()

    # ------------------------------------------------------------ service

    def version(self) -> Version:
        """tfslurm's version and the Slurm releases on both ends."""
        return from_json(Version, self._http.json("GET", "/version"))

    def create_token(self, user: Optional[str] = None, admin: bool = False) -> CreatedToken:
        """A new token for `user` (default the caller: with MUNGE, your own)."""
        body: Dict[str, Any] = {"admin": admin}
        if user:
            body["user"] = user
        return from_json(CreatedToken, self._http.json("POST", "/tokens", body))


def _merge(a: Dict[str, Any], b: Mapping[str, Any]) -> Dict[str, Any]:
    """b merged into a, objects recursively (a JSON merge patch of patches)."""
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out
