"""Training scalars as pandas DataFrames, for notebooks. pandas is imported
only here, when a frame is asked for: the package needs it for nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Sequence

if TYPE_CHECKING:
    from .types import Metrics

COLUMNS = ["experiment_id", "tag", "attempt", "step", "value", "wall_time"]


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError("a DataFrame needs pandas: pip install pandas (or 'tfslurm[pandas]'); "
                          "Metrics.points(tag) and Metrics.series give the same as lists") from None
    return pandas


def metrics_frame(metrics: Sequence["Metrics"]) -> Any:
    """One row per point of every tag of every experiment, in COLUMNS."""
    pd = _pandas()
    rows: Dict[str, List[Any]] = {c: [] for c in COLUMNS}
    for m in metrics:
        for s in m.series:
            n = len(s.step)
            rows["experiment_id"] += [m.experiment_id] * n
            rows["tag"] += [s.tag] * n
            rows["attempt"] += s.attempt
            rows["step"] += s.step
            rows["value"] += [float("nan") if v is None else v for v in s.value]
            rows["wall_time"] += s.wall_time
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["wall_time"] = pd.to_datetime(frame["wall_time"], unit="s", utc=True)
    return frame


def compare_frame(metrics: Sequence["Metrics"], tag: str) -> Any:
    """`tag` of each experiment side by side: indexed by step, a column per
    experiment. A step that more than one attempt reported (a restart redid
    it) keeps the latest attempt's value."""
    pd = _pandas()
    columns = {}
    for m in metrics:
        points = sorted(m.points(tag), key=lambda p: (p.step, p.attempt))
        by_step: Dict[int, float] = {}
        for p in points:
            by_step[p.step] = float("nan") if p.value is None else p.value
        columns[m.experiment_id] = pd.Series(by_step, dtype="float64")
    frame = pd.DataFrame(columns)
    frame.index.name = "step"
    return frame.sort_index()
