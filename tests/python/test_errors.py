"""The service's error answers as exceptions: each code its class, each bad
field with the field, the value and what is allowed, as the service wrote
them. The reasons below are the service's own forms (service/core/spec_checker.h)."""
import json

import pytest

from tfslurm import errors
from tfslurm.errors import FieldError, error_from_answer


def answer(code, message, fields=(), retryable=False):
    return json.dumps({"error": {"code": code, "message": message, "retryable": retryable,
                                 "fields": [{"field": f, "reason": r} for f, r in fields]}}).encode()


@pytest.mark.parametrize("status,code,cls", [
    (400, "invalid_argument", errors.InvalidArgument), (401, "unauthenticated", errors.Unauthenticated),
    (403, "permission_denied", errors.PermissionDenied), (404, "not_found", errors.NotFound),
    (409, "already_exists", errors.AlreadyExists), (409, "failed_precondition", errors.FailedPrecondition),
    (429, "resource_exhausted", errors.ResourceExhausted), (500, "internal", errors.Internal),
    (503, "unavailable", errors.Unavailable)])
def test_each_code_is_its_own_class(status, code, cls):
    e = error_from_answer(status, answer(code, "why", retryable=code == "unavailable"), "http://h:1")
    assert type(e) is cls and e.code == code and e.http_status == status and str(e) == "why"
    assert isinstance(e, errors.ServiceError) and isinstance(e, errors.TfslurmError)
    assert e.retryable == (code == "unavailable")


def test_a_bad_spec_carries_every_field_with_value_and_what_is_allowed():
    e = error_from_answer(400, answer("invalid_argument", "the experiment spec has 4 invalid fields", [
        ("resources.nodes", "must be from 1 to 10000, got 0"),
        ("placement", 'must be one of spread | pack, got "zig"'),
        ("resources.nodse", "unknown field; did you mean 'resources.nodes'? allowed here: partition, nodes, "
                            "tasks_per_node"),
        ("workdir", "is 5000 bytes; at most 4096 allowed"),
    ]), "http://h:1")
    assert isinstance(e, errors.InvalidArgument) and isinstance(e, ValueError)
    nodes = e.field("resources.nodes")
    assert (nodes.value, nodes.allowed) == ("0", "from 1 to 10000")
    placement = e.field("placement")
    assert (placement.value, placement.allowed) == ('"zig"', "one of spread | pack")
    unknown = e.field("resources.nodse")
    assert unknown.suggestion == "resources.nodes" and unknown.allowed == "partition, nodes, tasks_per_node"
    assert unknown.value is None
    assert (e.field("workdir").value, e.field("workdir").allowed) == ("5000 bytes", "at most 4096")
    # The service's words stay whole, and str() lists every field.
    assert nodes.reason == "must be from 1 to 10000, got 0"
    assert str(e).splitlines() == ["the experiment spec has 4 invalid fields",
                                   "  resources.nodes: must be from 1 to 10000, got 0",
                                   '  placement: must be one of spread | pack, got "zig"',
                                   "  resources.nodse: unknown field; did you mean 'resources.nodes'? allowed "
                                   "here: partition, nodes, tasks_per_node",
                                   "  workdir: is 5000 bytes; at most 4096 allowed"]


def test_an_allowed_list_with_commas_stays_whole():
    f = FieldError.from_reason("restart.on[0]", "must be one of preempted, timeout, node_fail, got \"x\"")
    assert (f.allowed, f.value) == ("one of preempted, timeout, node_fail", '"x"')


def test_a_reason_of_another_form_keeps_value_and_allowed_unknown():
    f = FieldError.from_reason("resources.mem_per_task_mb", "2 tasks x 5000 MB = 10000 MB per node, but ...")
    assert (f.value, f.allowed, f.suggestion) == (None, None, None)
    assert str(f) == "resources.mem_per_task_mb: 2 tasks x 5000 MB = 10000 MB per node, but ..."


def test_an_answer_that_is_not_tfslurmds_says_so():
    e = error_from_answer(502, b"<html>Bad Gateway</html>", "http://h:1")
    assert type(e) is errors.ServiceError
    assert str(e) == "http://h:1 answered HTTP 502, which is not tfslurmd's error format: <html>Bad Gateway</html>"
    assert type(error_from_answer(401, b"no", "http://h:1")) is errors.Unauthenticated


def test_an_unknown_code_keeps_it():
    e = error_from_answer(418, answer("teapot", "short and stout"), "http://h:1")
    assert type(e) is errors.ServiceError and e.code == "teapot"
