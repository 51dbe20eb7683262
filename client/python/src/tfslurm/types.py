"""The shapes of tfslurmd's REST API, as Python dataclasses.

Written by hand, each naming the schema of schema/openapi.yaml it stands for
(``_schema``), and checked against that document by
tests/python/test_openapi_types.py: every property is a field of the same
name and a matching type, every enum a Literal of the same values, a
nullable property an Optional field, and an optional one a field with a
default. A generator was not used: the well-kept ones (openapi-generator,
openapi-python-client, datamodel-code-generator) emit code that needs
pydantic or attrs and httpx at run time, dependencies that training
environments pin to conflicting versions (pydantic 1 against 2), for what
two dozen dataclasses say.

Two kinds:
- what a user writes, the spec (:class:`ExperimentSpec` and its parts):
  every field defaults to None, which leaves it out of the request, so the
  service's default applies; ``to_dict()`` is the JSON the API takes;
- what the service answers (:class:`Experiment`, :class:`Metrics`,
  :class:`Sweep`...), read by :func:`from_json`, which keeps no field it
  does not know (a newer service's) and names any that has the wrong type.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
import typing
from dataclasses import dataclass, field
from typing import (TYPE_CHECKING, Any, ClassVar, Dict, List, Literal, Optional, Type, TypeVar,
                    Union, cast)

from .errors import ProtocolError

if TYPE_CHECKING:
    from .client import Client

T = TypeVar("T")

Framework = Literal["tensorflow", "pytorch", "jax"]
Role = Literal["chief", "ps", "worker", "evaluator", "rank"]
SuccessPolicy = Literal["auto", "chief", "worker0", "all_workers"]
RestartClass = Literal["preempted", "timeout", "node_fail", "retryable_exit", "stalled",
                       "startup_error"]
ExperimentState = Literal["queued", "starting", "running", "restarting", "succeeded", "failed",
                          "cancelled"]
SlurmState = Literal["", "PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED",
                     "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
                     "UNKNOWN"]
EndReason = Literal["", "succeeded", "cancelled", "preempted", "timeout", "node_fail",
                    "retryable_exit", "permanent_exit", "startup_error", "start_failed", "stalled",
                    "unknown", "stopped_early"]
AttemptState = Literal["submitting", "pending", "running", "ended"]
TaskState = Literal["pending", "registered", "running", "succeeded", "failed", "reaped", "lost"]
SweepState = Literal["running", "completed", "cancelled"]
ContainerRuntime = Literal["auto", "pyxis", "enroot", "oci", "apptainer"]
TrialState = Literal["running", "ended", "not_started"]
# An event's short code (docs/design.md, "Events", says when each is written).
EventCode = Literal["submitting", "submitted", "retry", "recovered", "state", "job", "reconnected",
                    "assigned", "checkpoint", "heartbeat", "scalars", "lost", "exited", "reaped",
                    "reaping", "stalled", "exclude", "restart", "restarted_alone", "stopped_early"]

TERMINAL_STATES = ("succeeded", "failed", "cancelled")

_S = "#/components/schemas/"


# ------------------------------------------------------------------ the spec

class _Spec:
    """A part of the spec: ``to_dict()`` leaves out what is None."""

    def to_dict(self) -> Dict[str, Any]:
        out = _drop_none(dataclasses.asdict(cast(Any, self)))
        assert isinstance(out, dict)
        return out


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


@dataclass
class ClusterShape(_Spec):
    """How many tasks of each role (TensorFlow)."""
    _schema: ClassVar[str] = _S + "ClusterShape"
    chief: Optional[int] = None
    ps: Optional[int] = None
    worker: Optional[int] = None
    evaluator: Optional[int] = None


@dataclass
class PytorchOptions(_Spec):
    _schema: ClassVar[str] = _S + "PytorchOptions"
    omp_num_threads: Union[int, Literal["auto"], None] = None


@dataclass
class Resources(_Spec):
    """What Slurm gives the job (schema/experiment-spec.md, resources)."""
    _schema: ClassVar[str] = _S + "Resources"
    partition: Optional[str] = None
    nodes: Optional[int] = None
    tasks_per_node: Optional[int] = None
    cpus_per_task: Optional[int] = None
    gpus_per_node: Optional[int] = None
    gpus_per_task: Optional[int] = None
    mem_per_task_mb: Union[int, Literal["auto"], None] = None
    time_limit: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    reservation: Optional[str] = None
    exclude: Optional[str] = None
    constraint: Optional[str] = None
    nodelist: Optional[str] = None
    exclusive: Optional[bool] = None
    spare_nodes: Optional[int] = None


@dataclass
class RoleResources(_Spec):
    """One TensorFlow role's own resources (a component of a heterogeneous job)."""
    _schema: ClassVar[str] = _S + "RoleResources"
    partition: Optional[str] = None
    nodes: Optional[int] = None
    tasks_per_node: Optional[int] = None
    cpus_per_task: Optional[int] = None
    gpus_per_node: Optional[int] = None
    gpus_per_task: Optional[int] = None
    mem_per_task_mb: Union[int, Literal["auto"], None] = None
    constraint: Optional[str] = None
    nodelist: Optional[str] = None
    exclusive: Optional[bool] = None


@dataclass
class Roles(_Spec):
    _schema: ClassVar[str] = _S + "ExperimentSpec/properties/roles"
    chief: Optional[RoleResources] = None
    ps: Optional[RoleResources] = None
    worker: Optional[RoleResources] = None
    evaluator: Optional[RoleResources] = None


@dataclass
class Network(_Spec):
    _schema: ClassVar[str] = _S + "Network"
    address: Optional[str] = None


@dataclass
class RestartPolicy(_Spec):
    _schema: ClassVar[str] = _S + "RestartPolicy"
    max_restarts: Optional[int] = None
    on: Optional[List[RestartClass]] = None
    backoff_s: Optional[int] = None
    in_allocation: Optional[bool] = None
    max_task_restarts: Optional[int] = None


@dataclass
class Progress(_Spec):
    _schema: ClassVar[str] = _S + "Progress"
    stall_timeout_s: Optional[int] = None


@dataclass
class Checkpoint(_Spec):
    _schema: ClassVar[str] = _S + "Checkpoint"
    signal_grace_s: Optional[int] = None


@dataclass
class ContainerMount(_Spec):
    """A directory the container sees: ``target`` defaults to ``source``."""
    _schema: ClassVar[str] = _S + "Container/properties/mounts/items/oneOf/1"
    source: str
    target: Optional[str] = None
    read_only: Optional[bool] = None


@dataclass
class RoleImage(_Spec):
    _schema: ClassVar[str] = _S + "RoleImage"
    image: str


@dataclass
class ContainerRoles(_Spec):
    """TensorFlow only: a role's own image (a ps image need not be a GPU image)."""
    _schema: ClassVar[str] = _S + "Container/properties/roles"
    chief: Optional[RoleImage] = None
    ps: Optional[RoleImage] = None
    worker: Optional[RoleImage] = None
    evaluator: Optional[RoleImage] = None


@dataclass
class Container(_Spec):
    """The image every task's program runs in (docs/containers.md)."""
    _schema: ClassVar[str] = _S + "Container"
    image: str
    runtime: Optional[ContainerRuntime] = None
    # "SRC", "SRC:DST" or "SRC:DST:ro|rw", or a ContainerMount.
    mounts: Optional[List[Union[str, ContainerMount]]] = None
    roles: Optional[ContainerRoles] = None


@dataclass
class ExperimentSpec(_Spec):
    """An experiment spec (schema/experiment-spec.md); None leaves a field to its default."""
    _schema: ClassVar[str] = _S + "ExperimentSpec"
    command: List[str]
    id: Optional[str] = None
    framework: Optional[Framework] = None
    pytorch: Optional[PytorchOptions] = None
    workdir: Optional[str] = None
    env: Optional[Dict[str, str]] = None
    cluster: Optional[ClusterShape] = None
    placement: Union[Literal["spread", "pack"], List[Role], None] = None
    resources: Optional[Resources] = None
    roles: Optional[Roles] = None
    network: Optional[Network] = None
    success: Optional[SuccessPolicy] = None
    restart: Optional[RestartPolicy] = None
    progress: Optional[Progress] = None
    checkpoint: Optional[Checkpoint] = None
    model_dir: Optional[str] = None
    container: Optional[Container] = None


# ------------------------------------------------------------- the answers

@dataclass
class CheckpointInfo:
    _schema: ClassVar[str] = _S + "CheckpointInfo"
    step: int
    path: str


@dataclass
class RoleCounts:
    _schema: ClassVar[str] = _S + "RoleCounts"
    total: int
    registered: int
    running: int
    done: int
    failed: int


@dataclass
class Attempt:
    """One attempt: a Slurm job of its own, or a restart in place inside the one before."""
    _schema: ClassVar[str] = _S + "Attempt"
    number: int
    slurm_job_id: Optional[int]
    job_name: str
    state: AttemptState
    slurm_state: SlurmState
    end_reason: EndReason
    reason: str
    nodes: str
    start_step: Optional[int]
    exit_code: int
    in_place: bool
    spec_revision: int
    submitted_at: Optional[datetime.datetime]
    started_at: Optional[datetime.datetime]
    ended_at: Optional[datetime.datetime]


@dataclass
class TaskStatus:
    """One Slurm task of the current attempt (one tfslurm-agent and its program)."""
    _schema: ClassVar[str] = _S + "Task"
    proc_id: int
    role: Role
    index: int
    node: str
    local_rank: int
    address: str
    component: int
    state: TaskState
    exit_code: Optional[int]
    signal: Optional[int]
    detail: str
    restarts: int
    registered_at: Optional[datetime.datetime]
    ended_at: Optional[datetime.datetime]
    heartbeat_age_s: Optional[float]

    @property
    def name(self) -> str:
        """ROLE:INDEX, as logs(task=...) takes it."""
        return f"{self.role}:{self.index}"


@dataclass
class Event:
    """One transition, for people: ``what`` is a short code, ``why`` the words."""
    _schema: ClassVar[str] = _S + "Event"
    id: int
    at: Optional[datetime.datetime]
    attempt: int
    what: EventCode
    why: str


@dataclass
class SpecRevision:
    _schema: ClassVar[str] = _S + "Experiment/allOf/1/properties/spec_revisions/items"
    revision: int
    created_at: Optional[datetime.datetime]
    changes: str


@dataclass
class RoleContainer:
    """The image and the runtime (the site's, for "auto") one role runs in."""
    _schema: ClassVar[str] = _S + "Experiment/allOf/1/properties/containers/items"
    role: str
    image: str
    runtime: ContainerRuntime


@dataclass
class Spare:
    _schema: ClassVar[str] = _S + "Experiment/allOf/1/properties/spares/items"
    node: str
    waiting: bool


class _ExperimentView:
    """What ExperimentSummary and Experiment share: its state, and the client
    it was read through, to act on it."""

    id: str
    state: ExperimentState
    attempt: int
    reason: str
    checkpoint: Optional[CheckpointInfo]
    _client: Optional["Client"]

    @property
    def finished(self) -> bool:
        """Succeeded, failed or cancelled (a resume may start it again)."""
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self) -> bool:
        return self.state == "succeeded"

    def __repr__(self) -> str:
        step = self.checkpoint.step if self.checkpoint else None
        return (f"{type(self).__name__}(id={self.id!r}, state={self.state!r}, "
                f"attempt={self.attempt}, checkpoint_step={step}, reason={self.reason!r})")

    def _bound(self) -> "Client":
        if self._client is None:
            raise ValueError(f"experiment {self.id!r} was not read through a Client")
        return self._client

    def refresh(self) -> "Experiment":
        """The experiment as it is now, all of it."""
        return self._bound().get(self.id)

    def wait(self, **kwargs: Any) -> "Experiment":
        """Client.wait for this experiment."""
        return self._bound().wait(self.id, **kwargs)

    def logs(self, task: Optional[str] = None, **kwargs: Any) -> str:
        """Client.logs for this experiment."""
        return self._bound().logs(self.id, task, **kwargs)

    def follow_logs(self, task: Optional[str] = None, **kwargs: Any) -> typing.Iterator[str]:
        """Client.follow_logs for this experiment."""
        return self._bound().follow_logs(self.id, task, **kwargs)

    def metrics(self, tags: Optional[List[str]] = None) -> "Metrics":
        return self._bound().metrics(self.id, tags)

    def resume(self, **kwargs: Any) -> "Experiment":
        """Client.resume for this experiment."""
        return self._bound().resume(self.id, **kwargs)

    def cancel(self) -> "Experiment":
        return self._bound().cancel(self.id)

    def delete(self, files: bool = False) -> "Deleted":
        return self._bound().delete(self.id, files=files)

    def sbatch(self, attempt: Optional[int] = None) -> str:
        return self._bound().sbatch(self.id, attempt)


@dataclass(repr=False)
class ExperimentSummary(_ExperimentView):
    """An experiment as lists show it."""
    _schema: ClassVar[str] = _S + "ExperimentSummary"
    id: str
    owner: str
    state: ExperimentState
    reason: str
    attempt: int
    restarts: int
    model_dir: str
    mem_per_task_mb: int
    mem_explanation: str
    checkpoint: Optional[CheckpointInfo]
    created_at: Optional[datetime.datetime]
    updated_at: Optional[datetime.datetime]
    next_attempt_at: Optional[datetime.datetime]
    slurm_job_id: Optional[int]
    nodes: str
    slurm_state: Optional[SlurmState] = None  # open experiments only
    task_counts: Optional[Dict[str, RoleCounts]] = None  # open experiments only
    _client: Optional["Client"] = field(default=None, repr=False, compare=False)


@dataclass(repr=False)
class Experiment(_ExperimentView):
    """Everything GET /experiments/{id} shows, with what can be done to it."""
    _schema: ClassVar[str] = _S + "Experiment"
    id: str
    owner: str
    state: ExperimentState
    reason: str
    attempt: int
    restarts: int
    model_dir: str
    mem_per_task_mb: int
    mem_explanation: str
    checkpoint: Optional[CheckpointInfo]
    created_at: Optional[datetime.datetime]
    updated_at: Optional[datetime.datetime]
    next_attempt_at: Optional[datetime.datetime]
    slurm_job_id: Optional[int]
    nodes: str
    excluded_nodes: List[str]
    spec: ExperimentSpec
    spec_revision: int
    spec_revisions: List[SpecRevision]
    attempts: List[Attempt]
    tasks: List[TaskStatus]
    tasks_total: int
    spares: List[Spare]
    task_counts: Dict[str, RoleCounts]
    events: List[Event]
    # Empty without a container, and from a tfslurmd older than containers.
    containers: List[RoleContainer] = field(default_factory=list)
    slurm_state: Optional[SlurmState] = None  # open experiments only
    _client: Optional["Client"] = field(default=None, repr=False, compare=False)


@dataclass
class ExperimentList:
    """One page of experiments, newest first, and how many match in all."""
    _schema: ClassVar[str] = _S + "ListResult"
    experiments: List[ExperimentSummary]
    total: int
    limit: int
    offset: int

    def __iter__(self) -> typing.Iterator[ExperimentSummary]:
        return iter(self.experiments)

    def __len__(self) -> int:
        return len(self.experiments)


@dataclass
class DryRun:
    """A submission checked and rendered, nothing stored or submitted."""
    _schema: ClassVar[str] = _S + "DryRunResult"
    id: str
    spec: ExperimentSpec
    mem_per_task_mb: int
    mem_per_cpu_mb: int
    mem_explanation: str
    job_name: str
    sbatch: str


@dataclass
class Deleted:
    _schema: ClassVar[str] = ("#/paths/~1experiments~1{id}~1delete/post/responses/200/content/"
                              "application~1json/schema")
    id: str
    deleted: bool
    files_removed_from: str
    entries_removed: int
    model_dir_kept: str


@dataclass
class CreatedToken:
    _schema: ClassVar[str] = ("#/paths/~1tokens/post/responses/201/content/"
                              "application~1json/schema")
    token: str = field(repr=False)
    user: str
    admin: bool


@dataclass
class VersionTfslurm:
    _schema: ClassVar[str] = _S + "Version/properties/tfslurm"
    version: str
    commit: str


@dataclass
class VersionSlurm:
    _schema: ClassVar[str] = _S + "Version/properties/slurm"
    libslurm: str
    slurmctld: Optional[str]


@dataclass
class Version:
    _schema: ClassVar[str] = _S + "Version"
    tfslurm: VersionTfslurm
    slurm: VersionSlurm


# ----------------------------------------------------------------- metrics

@dataclass
class ScalarPoint:
    _schema: ClassVar[str] = _S + "ScalarPoint"
    step: int
    value: Optional[float]  # None where NaN or an infinity was reported
    wall_time: float
    attempt: int


@dataclass
class MetricLimits:
    _schema: ClassVar[str] = _S + "ExperimentMetrics/properties/limits"
    points_per_tag: int
    tags: int


@dataclass
class TagSummary:
    _schema: ClassVar[str] = _S + "ExperimentMetrics/properties/tags/items"
    tag: str
    points: int
    reported: int
    last: Optional[ScalarPoint]


@dataclass
class Series:
    """One tag's points as columns of equal length, in (attempt, step) order."""
    _schema: ClassVar[str] = _S + "ExperimentMetrics/properties/series/items"
    tag: str
    step: List[int]
    value: List[Optional[float]]
    wall_time: List[float]
    attempt: List[int]


@dataclass
class StepsPerSecond:
    _schema: ClassVar[str] = _S + "ExperimentMetrics/properties/steps_per_second"
    tag: str
    wall_time: List[float]
    value: List[float]
    attempt: List[int]


@dataclass
class TensorBoard:
    _schema: ClassVar[str] = _S + "ExperimentMetrics/properties/tensorboard"
    logdir: str
    command: str


@dataclass
class Metrics:
    """An experiment's training scalars (docs/scalars.md)."""
    _schema: ClassVar[str] = _S + "ExperimentMetrics"
    experiment_id: str
    limits: MetricLimits
    tags: List[TagSummary]
    series: List[Series]
    steps_per_second: Optional[StepsPerSecond]
    tensorboard: Optional[TensorBoard]

    @property
    def tag_names(self) -> List[str]:
        return [t.tag for t in self.tags]

    def series_of(self, tag: str) -> Series:
        """The points of `tag`; KeyError naming the tags there are."""
        for s in self.series:
            if s.tag == tag:
                return s
        raise KeyError(f"no tag {tag!r} in {self.experiment_id}'s metrics; its tags: "
                       + (", ".join(self.tag_names) or "none yet"))

    def points(self, tag: str) -> List[ScalarPoint]:
        """`tag`'s points as a plain list, in (attempt, step) order."""
        s = self.series_of(tag)
        return [ScalarPoint(*p) for p in zip(s.step, s.value, s.wall_time, s.attempt)]

    def last(self, tag: str) -> Optional[ScalarPoint]:
        """`tag`'s newest point, or None."""
        return next((t.last for t in self.tags if t.tag == tag), None)

    def to_dataframe(self) -> Any:
        """Every point as a pandas DataFrame, one row each: experiment_id, tag,
        attempt, step, value, wall_time (a UTC datetime). Needs pandas."""
        from ._frames import metrics_frame
        return metrics_frame([self])


# ------------------------------------------------------------------ sweeps

class _SweepView:
    id: str
    state: SweepState
    trials_total: int
    reason: str
    _client: Optional["Client"]

    @property
    def finished(self) -> bool:
        """Completed or cancelled."""
        return self.state != "running"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(id={self.id!r}, state={self.state!r}, "
                f"trials_total={self.trials_total}, reason={self.reason!r})")

    def _bound(self) -> "Client":
        if self._client is None:
            raise ValueError(f"sweep {self.id!r} was not read through a Client")
        return self._client

    def refresh(self) -> "Sweep":
        return self._bound().sweep(self.id)

    def wait(self, **kwargs: Any) -> "Sweep":
        """Client.wait_sweep for this sweep."""
        return self._bound().wait_sweep(self.id, **kwargs)

    def cancel(self) -> "Sweep":
        return self._bound().cancel_sweep(self.id)


@dataclass(repr=False)
class SweepSummary(_SweepView):
    _schema: ClassVar[str] = _S + "SweepSummary"
    id: str
    owner: str
    state: SweepState
    reason: str
    trials_total: int
    created_at: Optional[datetime.datetime]
    updated_at: Optional[datetime.datetime]
    _client: Optional["Client"] = field(default=None, repr=False, compare=False)


@dataclass
class SweepTrial:
    _schema: ClassVar[str] = _S + "SweepTrial"
    index: int
    experiment_id: str
    params: Dict[str, Any]
    state: TrialState
    experiment_state: Optional[ExperimentState]
    reason: str
    end_reason: str
    objective: Optional[float]
    objective_step: Optional[int]
    last_step: Optional[int]
    rungs_passed: int
    node_seconds: float
    note: str
    started_at: Optional[datetime.datetime]
    ended_at: Optional[datetime.datetime]


@dataclass(repr=False)
class Sweep(_SweepView):
    """A sweep with its trials, their objectives and the best trial."""
    _schema: ClassVar[str] = _S + "Sweep"
    id: str
    owner: str
    state: SweepState
    reason: str
    trials_total: int
    created_at: Optional[datetime.datetime]
    updated_at: Optional[datetime.datetime]
    spec: Dict[str, Any]
    objective: Dict[str, Any]
    node_seconds: float
    counts: Dict[str, int]
    best_trial: Optional[SweepTrial]
    trials: List[SweepTrial]
    _client: Optional["Client"] = field(default=None, repr=False, compare=False)

    def best_experiment(self) -> Optional[Experiment]:
        """The best trial's experiment, or None before any objective."""
        if self.best_trial is None:
            return None
        return self._bound().get(self.best_trial.experiment_id)


# ------------------------------------------------------------- from JSON

def _parse_time(text: str) -> datetime.datetime:
    # "2026-11-21T23:22:02.123Z"; Python before 3.11 reads no "Z".
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is Union:
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(option, value, where)
            except ProtocolError as e:
                errors.append(str(e))
        raise ProtocolError(errors[0] if len(errors) == 1 else
                            f"{where}: {value!r} is none of {', '.join(map(_type_name, options))}")
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ProtocolError(f"{where}: {value!r} is not one of "
                                f"{', '.join(map(repr, typing.get_args(tp)))}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ProtocolError(f"{where}: expected a list, got {value!r}")
        (item,) = typing.get_args(tp)
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ProtocolError(f"{where}: expected an object, got {value!r}")
        _, item = typing.get_args(tp)
        return {k: _convert(item, v, f"{where}.{k}") for k, v in value.items()}
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return from_json(cast(Type[Any], tp), value, where)
    if tp is datetime.datetime:
        if isinstance(value, str):
            try:
                return _parse_time(value)
            except ValueError:
                pass
        raise ProtocolError(f"{where}: expected an RFC 3339 time, got {value!r}")
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp in (int, str, bool) and type(value) is tp:
        return value
    raise ProtocolError(f"{where}: expected {_type_name(tp)}, got {value!r}")


def _type_name(tp: Any) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "a boolean"}.get(
        tp, getattr(tp, "__name__", str(tp)))


_hints_cache: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    if cls not in _hints_cache:
        module = sys.modules[cls.__module__]
        # "Client" is imported for type checking only: no run-time use here.
        _hints_cache[cls] = typing.get_type_hints(cls, vars(module), {"Client": object})
    return _hints_cache[cls]


def from_json(cls: Type[T], data: Any, where: str = "") -> T:
    """A `cls` from the service's JSON. Fields it does not know are left out;
    a missing field without a default, or one of the wrong type, is a
    ProtocolError naming it."""
    where = where or cls.__name__
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: expected an object, got {data!r}")
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cast(Any, cls)):
        if f.name.startswith("_"):
            continue
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ProtocolError(f"{where}: the answer has no {f.name!r}")
            continue
        kwargs[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}")
    return cls(**kwargs)
