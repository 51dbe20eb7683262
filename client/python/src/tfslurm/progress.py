"""How wait() shows an experiment (or a sweep) while it runs.

- In a Jupyter notebook (an IPython kernel): one output block, updated in
  place, with a status line and the newest events (IPython's display with
  a display_id; no widget library).
- On a terminal: each event on a line of its own, as ``tfctl submit
  --wait`` prints them, and below them a status line redrawn in place.
- Anywhere else (a pipeline's log): the event lines alone.

Everything the service sent is escaped before it is shown (_text.py).
"""

from __future__ import annotations

import datetime
import sys
import time
from typing import IO, Any, List, Optional

from . import _text
from .types import Event, Experiment, Sweep

_EVENTS_SHOWN = 15  # the newest events a notebook's block keeps


def format_event(e: Event) -> str:
    """An event as tfctl prints it: time, attempt, what: why."""
    at = e.at.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if e.at else "-"
    return _text.escape(f"{at}  attempt {e.attempt}  {e.what}: {e.why}")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


def status_line(experiment: Experiment, scalar: Optional[str], value: Any,
                started: float) -> str:
    parts = [experiment.id, experiment.state, f"attempt {experiment.attempt}"]
    if experiment.checkpoint:
        parts.append(f"checkpoint {experiment.checkpoint.step}")
    if scalar and value is not None:
        parts.append(f"{scalar} {value.value:.6g} at step {value.step}" if value.value is not None
                     else f"{scalar} NaN at step {value.step}")
    parts.append(_duration(time.monotonic() - started))
    return _text.escape("  ".join(str(p) for p in parts))


def sweep_status_line(sweep: Sweep, started: float) -> str:
    counts = ", ".join(f"{v} {k}" for k, v in sorted(sweep.counts.items()) if v)
    parts = [sweep.id, sweep.state, f"{len(sweep.trials)} of {sweep.trials_total} trials started"]
    if counts:
        parts.append(counts)
    best = sweep.best_trial
    if best is not None and best.objective is not None:
        parts.append(f"best {best.experiment_id} ({best.objective:.6g})")
    parts.append(_duration(time.monotonic() - started))
    return _text.escape("  ".join(parts))


class Display:
    """Where wait() shows progress: see the module's doc for the three kinds."""

    def event(self, line: str) -> None:
        raise NotImplementedError

    def status(self, line: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Silent(Display):
    def event(self, line: str) -> None:
        pass

    def status(self, line: str) -> None:
        pass


class Lines(Display):
    """Event lines only: a log file or a pipeline's output."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def event(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def status(self, line: str) -> None:
        pass


class Terminal(Display):
    """Event lines, and the status line redrawn below them."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.shown = ""

    def _clear(self) -> None:
        if self.shown:
            self.out.write("\r\x1b[2K")
            self.shown = ""

    def event(self, line: str) -> None:
        self._clear()
        self.out.write(line + "\n")
        self.out.flush()

    def status(self, line: str) -> None:
        self._clear()
        self.out.write(line)
        self.out.flush()
        self.shown = line

    def close(self) -> None:
        if self.shown:
            self.out.write("\n")
            self.out.flush()
            self.shown = ""


class Notebook(Display):
    """One block in the notebook's output, updated in place."""

    def __init__(self, ipython_display: Any) -> None:
        self._display = ipython_display
        self._handle: Any = None
        self.events: List[str] = []
        self.line = ""

    def _render(self) -> None:
        from IPython.display import HTML  # present: this is a notebook
        shown = self.events[-_EVENTS_SHOWN:]
        more = len(self.events) - len(shown)
        text = "\n".join(([f"... {more} earlier events"] if more else []) + shown)
        html = (f"<pre style='margin:0'>{_text.escape_html(text)}</pre>"
                f"<b>{_text.escape_html(self.line)}</b>")
        if self._handle is None:
            self._handle = self._display(HTML(html), display_id=True)
        else:
            self._handle.update(HTML(html))

    def event(self, line: str) -> None:
        self.events.append(line)
        self._render()

    def status(self, line: str) -> None:
        if line != self.line:
            self.line = line
            self._render()


def _notebook_display() -> Any:
    """IPython's display when running in a notebook's kernel, else None."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    shell = ipython.get_ipython()
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
        return None
    from IPython.display import display
    return display


def choose(progress: Optional[bool], out: Optional[IO[str]] = None) -> Display:
    """The display for wait(progress=...): False silent; None or True by where this runs."""
    if progress is False:
        return Silent()
    stream = out if out is not None else sys.stderr
    notebook = _notebook_display() if out is None else None
    if notebook is not None:
        return Notebook(notebook)
    if stream.isatty():
        return Terminal(stream)
    return Lines(stream)
