"""tfslurm.compare: several experiments' scalar side by side."""

from __future__ import annotations

from typing import Any, Sequence, Union

from .types import Experiment, Metrics


def compare(experiments: Sequence[Union[Experiment, Metrics]], tag: str) -> Any:
    """`tag` of each experiment as a pandas DataFrame indexed by step, a column
    per experiment (the latest attempt's value where a restart redid a step).
    Experiments read through a Client fetch their metrics; Metrics are used
    as they are. Needs pandas."""
    from ._frames import compare_frame
    metrics = [m if isinstance(m, Metrics) else m.metrics([tag]) for m in experiments]
    return compare_frame(metrics, tag)
