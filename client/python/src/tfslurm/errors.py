"""What can go wrong, as exceptions.

The service answers every error in one shape (schema/openapi.yaml, Error):
``{"error": {"code", "message", "fields": [{"field", "reason"}],
"retryable"}}``. Each ``code`` is a class of its own below, all of them
:class:`ServiceError`; a bad spec's :class:`InvalidArgument` carries every
bad field as a :class:`FieldError`, with the field's path and the reason as
the service wrote them, and the value and what is allowed read from the
reason where it says them ("must be one of spread | pack, got \\"zig\\"").

Catch :class:`TfslurmError` for anything this package raises about the
service; :class:`ServiceUnreachable` when there was no answer at all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Type

__all__ = [
    "TfslurmError", "ServiceUnreachable", "ProtocolError", "SpecError", "ServiceError",
    "InvalidArgument", "NotFound", "AlreadyExists", "FailedPrecondition", "Unauthenticated",
    "PermissionDenied", "ResourceExhausted", "Unavailable", "Internal", "FieldError",
    "ExperimentFailed", "WaitTimeout",
]


class TfslurmError(Exception):
    """Base of every error this package raises about tfslurm."""


class ServiceUnreachable(TfslurmError, ConnectionError):
    """No answer from tfslurmd: it is not running there, or the network is in the way.

    The message names the URL tried and where it came from.
    """


class ProtocolError(TfslurmError):
    """An answer that is not what tfslurmd sends (another server at that URL?)."""


class SpecError(TfslurmError, ValueError):
    """A spec file that cannot be read (not found, not JSON or YAML), named with its line."""


class ExperimentFailed(TfslurmError):
    """``wait(check=True)``: the experiment ended without succeeding."""

    def __init__(self, message: str, experiment: Any) -> None:
        super().__init__(message)
        self.experiment = experiment


class WaitTimeout(TfslurmError, TimeoutError):
    """``wait(timeout=...)`` ran out; the experiment (or sweep) goes on."""


_MUST_GOT = re.compile(r"^must (?:be|have) (?P<allowed>.+), got (?P<value>.+)$", re.S)
_DID_YOU_MEAN = re.compile(r"did you mean '(?P<suggestion>[^']+)'\?")
_ALLOWED_HERE = re.compile(r"allowed here: (?P<allowed>.+)$", re.S)
_AT_MOST = re.compile(r"^is (?P<value>.+); (?P<allowed>at most .+) allowed$", re.S)


@dataclass(frozen=True)
class FieldError:
    """One bad field of a request, as the service named it.

    field: its path (``resources.nodes``, ``command[0]``, ``env.PATH``), a
    query parameter's name, or "" for the body as a whole.
    reason: the service's words, whole.
    value, allowed: what the field held and what would do, when the reason
    says them in the service's usual form ("must be from 1 to 10000, got
    0"); None otherwise.
    suggestion: for an unknown field, the known one it is nearest to.
    """

    field: str
    reason: str
    value: Optional[str] = None
    allowed: Optional[str] = None
    suggestion: Optional[str] = None

    @classmethod
    def from_reason(cls, field: str, reason: str) -> "FieldError":
        value = allowed = suggestion = None
        m = _MUST_GOT.match(reason)
        if m:
            # "must be X, got V": the last ", got " splits them, so that an
            # allowed list with commas in it stays whole.
            head, _, value = reason.rpartition(", got ")
            allowed = re.sub(r"^must (?:be|have) ", "", head)
        elif _AT_MOST.match(reason):
            m2 = _AT_MOST.match(reason)
            assert m2 is not None
            value, allowed = m2.group("value"), m2.group("allowed")
        s = _DID_YOU_MEAN.search(reason)
        if s:
            suggestion = s.group("suggestion")
        a = _ALLOWED_HERE.search(reason)
        if a and allowed is None:
            allowed = a.group("allowed")
        return cls(field, reason, value, allowed, suggestion)

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" if self.field else self.reason


class ServiceError(TfslurmError):
    """tfslurmd answered with an error.

    code: the service's kind of error (``invalid_argument``, ``not_found``...);
    message: its words for people; fields: every bad field (400), else empty;
    retryable: True only for ``unavailable`` (retry the same request later);
    http_status: the answer's HTTP status.
    """

    code = "unknown"

    def __init__(self, message: str, *, fields: Optional[List[FieldError]] = None,
                 retryable: bool = False, http_status: int = 0, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields: List[FieldError] = list(fields or [])
        self.retryable = retryable
        self.http_status = http_status
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        if not self.fields:
            return self.message
        return self.message + "".join(f"\n  {f}" for f in self.fields)

    def field(self, path: str) -> Optional[FieldError]:
        """The error about field `path`, if the service named it."""
        return next((f for f in self.fields if f.field == path), None)


class InvalidArgument(ServiceError, ValueError):
    """400: a bad spec or parameter; ``fields`` names each."""

    code = "invalid_argument"


class NotFound(ServiceError, LookupError):
    """404: no such experiment or sweep (or another user's: answered alike)."""

    code = "not_found"


class AlreadyExists(ServiceError):
    """409: the id is taken."""

    code = "already_exists"


class FailedPrecondition(ServiceError):
    """409: not in a state that allows it (resuming a running experiment, ...)."""

    code = "failed_precondition"


class Unauthenticated(ServiceError, PermissionError):
    """401: no token, an unknown one, or a refused MUNGE credential."""

    code = "unauthenticated"


class PermissionDenied(ServiceError, PermissionError):
    """403."""

    code = "permission_denied"


class ResourceExhausted(ServiceError):
    """413 or 429: a body over the limit, too many log follows."""

    code = "resource_exhausted"


class Unavailable(ServiceError):
    """503: a dependency (Slurm, the database, the disk) failed; retry later."""

    code = "unavailable"


class Internal(ServiceError):
    """500: a bug in the service."""

    code = "internal"


_BY_CODE: Dict[str, Type[ServiceError]] = {
    c.code: c for c in (InvalidArgument, NotFound, AlreadyExists, FailedPrecondition,
                        Unauthenticated, PermissionDenied, ResourceExhausted, Unavailable, Internal)
}


def error_from_answer(status: int, body: bytes, url: str) -> ServiceError:
    """The exception for an error answer: tfslurmd's error body, or (any other
    server's answer) its status and the start of the body."""
    try:
        doc = json.loads(body.decode("utf-8", "replace"))
    except ValueError:
        doc = None
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        code = error.get("code") if isinstance(error.get("code"), str) else ""
        cls = _BY_CODE.get(str(code))
        if cls is None:
            cls = Unauthenticated if status == 401 else ServiceError
        fields = [FieldError.from_reason(str(f.get("field", "")), str(f.get("reason", "")))
                  for f in error.get("fields") or [] if isinstance(f, dict)]
        return cls(error["message"], fields=fields, retryable=bool(error.get("retryable")),
                   http_status=status, code=str(code) if code and cls is ServiceError else None)
    excerpt = body[:200].decode("utf-8", "replace")
    cls = Unauthenticated if status == 401 else ServiceError
    return cls(f"{url} answered HTTP {status}, which is not tfslurmd's error format"
               + (f": {excerpt}" if excerpt else ""), http_status=status)
