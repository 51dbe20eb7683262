"""tfslurm from Python.

- :class:`Client`: submit, follow, resume and compare experiments and sweeps
  on a tfslurmd, from a notebook or a pipeline (docs/python.md);
- :mod:`tfslurm.task`: inside the training program, what this task is, its
  training scalars and the time-limit warning.

``import tfslurm.task`` in a training program loads none of the client: the
names below are loaded when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it, loaded on first use (PEP 562).
_LAZY = {
    "Client": "client",
    "Connection": "connection",
    "resolve_connection": "connection",
    "load_spec_file": "spec",
    "yaml_to_json": "spec",
    "compare": "_compare",
    **{name: "errors" for name in (
        "TfslurmError", "ServiceUnreachable", "ProtocolError", "SpecError", "ServiceError",
        "InvalidArgument", "NotFound", "AlreadyExists", "FailedPrecondition", "Unauthenticated",
        "PermissionDenied", "ResourceExhausted", "Unavailable", "Internal", "FieldError",
        "ExperimentFailed", "WaitTimeout")},
    **{name: "types" for name in (
        "ExperimentSpec", "ClusterShape", "Resources", "RoleResources", "Roles", "Network",
        "RestartPolicy", "Progress", "Checkpoint", "PytorchOptions", "Experiment",
        "ExperimentSummary", "ExperimentList", "Attempt", "Event", "Metrics", "Series",
        "ScalarPoint", "Sweep", "SweepTrial", "SweepSummary", "DryRun", "Deleted", "Version",
        "TaskStatus", "Container", "ContainerMount", "ContainerRoles", "RoleImage")},
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tfslurm' has no attribute {name!r}")
    value = getattr(importlib.import_module("." + module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:
    from ._compare import compare as compare
    from .client import Client as Client
    from .connection import Connection as Connection
    from .connection import resolve_connection as resolve_connection
    from .errors import (AlreadyExists as AlreadyExists, ExperimentFailed as ExperimentFailed,
                         FailedPrecondition as FailedPrecondition, FieldError as FieldError,
                         Internal as Internal, InvalidArgument as InvalidArgument,
                         NotFound as NotFound, PermissionDenied as PermissionDenied,
                         ProtocolError as ProtocolError, ResourceExhausted as ResourceExhausted,
                         ServiceError as ServiceError, ServiceUnreachable as ServiceUnreachable,
                         SpecError as SpecError, TfslurmError as TfslurmError,
                         Unauthenticated as Unauthenticated, Unavailable as Unavailable,
                         WaitTimeout as WaitTimeout)
    from .spec import load_spec_file as load_spec_file
    from .spec import yaml_to_json as yaml_to_json
    from .types import (Attempt as Attempt, Checkpoint as Checkpoint, Container as Container,
                        ContainerMount as ContainerMount, ContainerRoles as ContainerRoles,
                        RoleImage as RoleImage,
                        ClusterShape as ClusterShape, Deleted as Deleted, DryRun as DryRun,
                        Event as Event, Experiment as Experiment,
                        ExperimentList as ExperimentList, ExperimentSpec as ExperimentSpec,
                        ExperimentSummary as ExperimentSummary, Metrics as Metrics,
                        Network as Network, Progress as Progress,
                        PytorchOptions as PytorchOptions, Resources as Resources,
                        RestartPolicy as RestartPolicy, RoleResources as RoleResources,
                        Roles as Roles, ScalarPoint as ScalarPoint, Series as Series,
                        Sweep as Sweep, SweepSummary as SweepSummary, SweepTrial as SweepTrial,
                        TaskStatus as TaskStatus, Version as Version)
