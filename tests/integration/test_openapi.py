"""Contract test: schema/openapi.yaml against the code and a real tfslurmd.

- Every route the C++ sources register (server.Get/Post/Delete/...) is in
  the document with the same method, and the document has no route the
  code lacks.
- Patterns the document states (ids, partitions, account and qos names,
  the log's task) are the ones in the sources; its enums are checked
  against the code's name tables by tests/unit/names_test.cc.
- Real responses of a tfslurmd on a real local Slurm cluster (status,
  Content-Type and JSON body) are those the document describes for that
  operation, checked with a small JSON-schema validator (the OpenAPI 3.0
  subset the document uses). The validator is strict: an object with
  documented properties may not carry undocumented ones, so a field added
  to the code without the document fails here.
- Spec limits agree both ways: specs the document allows are accepted by
  the service (dry run), and single-field violations the document forbids
  are refused by the service with that field named.
"""
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import BIN, REPO, wait_for

try:
    import yaml
except ImportError:  # pragma: no cover
    pytest.fail("python3-yaml is needed (apt-get install python3-yaml; deploy/install-deps.sh)",
                pytrace=False)

DOC_PATH = os.path.join(REPO, "schema", "openapi.yaml")
HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


@pytest.fixture(scope="module")
def doc():
    with open(DOC_PATH) as f:
        return yaml.safe_load(f)


# --------------------------------------------------------------- validator

DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


class Validator:
    """JSON-schema subset of OpenAPI 3.0: $ref, allOf, oneOf, anyOf, type,
    nullable, enum, required, properties, additionalProperties, items,
    minimum/maximum, minLength/maxLength, pattern, minItems/maxItems,
    maxProperties, format date-time, and the extension x-propertyNames
    (OpenAPI 3.1's propertyNames). `strict`: an object schema that lists
    properties and says nothing about additionalProperties refuses others."""

    def __init__(self, document, strict=True):
        self.doc = document
        self.strict = strict

    def resolve(self, schema):
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            assert ref.startswith("#/"), f"only local $refs are supported: {ref}"
            node = self.doc
            for part in ref[2:].split("/"):
                node = node[part]
            schema = node
            seen += 1
            assert seen < 50, f"$ref loop at {ref}"
        return schema

    def flatten(self, schema):
        """Resolves $ref and merges allOf into one schema (properties and
        required are unioned), so strict checks see every property."""
        schema = self.resolve(schema)
        if "allOf" not in schema:
            return schema
        merged = {}
        for part in schema["allOf"] + [{k: v for k, v in schema.items() if k != "allOf"}]:
            part = self.flatten(part)
            for key, value in part.items():
                if key == "properties":
                    merged.setdefault("properties", {}).update(value)
                elif key == "required":
                    merged["required"] = sorted(set(merged.get("required", [])) | set(value))
                else:
                    merged[key] = value
        return merged

    def errors(self, value, schema, path="$"):
        schema = self.flatten(schema)
        if value is None:
            if schema.get("nullable") or not schema:
                return []
            if "oneOf" in schema or "anyOf" in schema:
                pass  # a branch may be nullable
            else:
                return [f"{path}: null is not allowed"]
        out = []
        for key in ("oneOf", "anyOf"):
            if key in schema:
                matches = [b for b in schema[key] if not self.errors(value, b, path)]
                if key == "oneOf" and len(matches) != 1:
                    detail = "; ".join(e for b in schema[key] for e in self.errors(value, b, path)[:1])
                    out.append(f"{path}: {json.dumps(value)[:80]} matches {len(matches)} of oneOf ({detail})")
                if key == "anyOf" and not matches:
                    out.append(f"{path}: matches none of anyOf")
        t = schema.get("type")
        checks = {
            "object": lambda v: isinstance(v, dict),
            "array": lambda v: isinstance(v, list),
            "string": lambda v: isinstance(v, str),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool),
        }
        if t is not None and not checks[t](value):
            return out + [f"{path}: expected {t}, got {type(value).__name__} {json.dumps(value)[:80]}"]
        if "enum" in schema and value not in schema["enum"]:
            out.append(f"{path}: {value!r} is not one of {schema['enum']}")
        if isinstance(value, str):
            if "pattern" in schema and not re.search(schema["pattern"], value):
                out.append(f"{path}: {value!r} does not match {schema['pattern']}")
            if "minLength" in schema and len(value) < schema["minLength"]:
                out.append(f"{path}: shorter than {schema['minLength']}")
            if "maxLength" in schema and len(value) > schema["maxLength"]:
                out.append(f"{path}: longer than {schema['maxLength']}")
            if schema.get("format") == "date-time" and not DATE_TIME.match(value):
                out.append(f"{path}: {value!r} is not an RFC 3339 date-time")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                out.append(f"{path}: {value} < minimum {schema['minimum']}")
            if "maximum" in schema and value > schema["maximum"]:
                out.append(f"{path}: {value} > maximum {schema['maximum']}")
        if isinstance(value, list):
            if "minItems" in schema and len(value) < schema["minItems"]:
                out.append(f"{path}: fewer than {schema['minItems']} items")
            if "maxItems" in schema and len(value) > schema["maxItems"]:
                out.append(f"{path}: more than {schema['maxItems']} items")
            if "items" in schema:
                for i, item in enumerate(value):
                    out += self.errors(item, schema["items"], f"{path}[{i}]")
        if isinstance(value, dict):
            props = schema.get("properties", {})
            for name in schema.get("required", []):
                if name not in value:
                    out.append(f"{path}: missing required {name!r}")
            if "maxProperties" in schema and len(value) > schema["maxProperties"]:
                out.append(f"{path}: more than {schema['maxProperties']} properties")
            if "x-propertyNames" in schema:
                for name in value:
                    out += [f"{path}: property name {e}" for e in
                            self.errors(name, schema["x-propertyNames"], repr(name))]
            extra_schema = schema.get("additionalProperties")
            for name, item in value.items():
                if name in props:
                    out += self.errors(item, props[name], f"{path}.{name}")
                elif extra_schema is False or (extra_schema is None and self.strict and props):
                    out.append(f"{path}: property {name!r} is not in the document")
                elif isinstance(extra_schema, dict):
                    out += self.errors(item, extra_schema, f"{path}.{name}")
        return out

    def check(self, value, schema, what):
        errs = self.errors(value, schema)
        assert not errs, f"{what} does not match the document:\n  " + "\n  ".join(errs[:20]) + \
            f"\nvalue: {json.dumps(value)[:2000]}"


def test_validator_catches_what_it_should(doc):
    """The validator is the instrument of every other test: check it first."""
    v = Validator(doc)
    spec = {"$ref": "#/components/schemas/ExperimentSpec"}
    assert not v.errors({"command": ["true"], "cluster": {"worker": 1}}, spec)
    assert v.errors({"cluster": {"worker": 1}}, spec)  # required command
    assert v.errors({"command": ["true"], "framework": "mxnet"}, spec)
    assert not v.errors({"command": ["true"], "framework": "jax"}, spec)
    assert not v.errors({"command": ["true"], "framework": "pytorch", "pytorch": {"omp_num_threads": 2}}, spec)
    assert v.errors({"command": ["true"], "framework": "pytorch", "pytorch": {"omp_num_threads": 0}}, spec)
    assert v.errors({"command": ["true"], "cluster": {"worker": 1}, "bogus": 1}, spec)
    assert v.errors({"command": ["true"], "cluster": {"worker": True}}, spec)  # bool is no integer
    assert v.errors({"command": ["true"], "cluster": {"worker": 1}, "placement": "zig"}, spec)
    assert not v.errors({"command": ["true"], "cluster": {"worker": 1}, "placement": ["worker"]}, spec)
    assert v.errors({"error": {"code": "nope", "message": "", "fields": [], "retryable": False}},
                    {"$ref": "#/components/schemas/Error"})
    summary = {"$ref": "#/components/schemas/ExperimentSummary"}
    assert any("not in the document" in e for e in v.errors({"surprise": 1}, summary))
    assert v.errors(None, {"$ref": "#/components/schemas/Health"})
    assert not v.errors(None, {"$ref": "#/components/schemas/Timestamp"})
    assert v.errors("yesterday", {"$ref": "#/components/schemas/Timestamp"})


# ------------------------------------------------------- the document alone

def iter_refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from iter_refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from iter_refs(v)


def operations(doc):
    for path, item in doc["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                yield path, method, item[method], item.get("parameters", [])


def test_document_is_well_formed(doc):
    v = Validator(doc)
    assert doc["openapi"] == "3.0.3"
    for ref in iter_refs(doc):
        v.resolve({"$ref": ref})  # raises KeyError when it does not resolve

    op_ids = [op["operationId"] for _, _, op, _ in operations(doc)]
    assert len(op_ids) == len(set(op_ids)), op_ids

    for path, method, op, shared in operations(doc):
        params = [v.resolve(p) for p in shared + op.get("parameters", [])]
        in_path = {p["name"] for p in params if p["in"] == "path"}
        assert in_path == set(re.findall(r"{(\w+)}", path)), (method, path, in_path)
        assert op.get("responses"), (method, path)
        for status in op["responses"]:
            assert re.fullmatch(r"[1-5]\d\d", str(status)), (method, path, status)

    # Examples must validate against their schemas (non-strict: examples may be partial).
    loose = Validator(doc, strict=False)
    for name, schema in doc["components"]["schemas"].items():
        if "example" in schema:
            loose.check(schema["example"], schema, f"example of {name}")
    for path, method, op, _ in operations(doc):
        bodies = [("request", op.get("requestBody", {}))]
        bodies += [(f"response {s}", v.resolve(r)) for s, r in op["responses"].items()]
        for what, body in bodies:
            for media, content in body.get("content", {}).items():
                if "example" in content:
                    Validator(doc).check(content["example"], content["schema"],
                                         f"{method.upper()} {path} {what} example ({media})")


def test_bearer_auth_everywhere_but_the_public_routes(doc):
    scheme = doc["components"]["securitySchemes"]["bearerAuth"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert doc["security"] == [{"bearerAuth": []}, {"mungeAuth": []}]
    public = {(m, p) for p, m, op, _ in operations(doc) if op.get("security", doc["security"]) == []}
    assert public == {("get", "/healthz"), ("get", "/"), ("get", "/ui/{path}"),
                      ("post", "/agent/v1/message")}, public
    for path, method, op, _ in operations(doc):
        if (method, path) not in public:
            assert "401" in op["responses"], f"{method} {path} needs a token but documents no 401"


# --------------------------------------------------- the document vs sources

def read_source(rel):
    with open(os.path.join(REPO, rel)) as f:
        return f.read()


def string_constants(source):
    """constexpr const char* kName = "..."; -> {kName: value}"""
    out = {}
    for m in re.finditer(r'constexpr\s+const\s+char\s*\*\s*(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*;', source):
        out[m.group(1)] = m.group(2).encode().decode("unicode_escape")
    return out


def folder_constants(folder):
    """The string constants of every header and source in a folder: routes
    use constants shared through headers (request_params.h)."""
    out = {}
    for name in sorted(os.listdir(os.path.join(REPO, folder))):
        if name.endswith((".h", ".cc")):
            out.update(string_constants(read_source(f"{folder}/{name}")))
    return out


def route_expression(source, start):
    """The first argument of a server.X( call starting at `start`: up to the
    first comma outside strings and parentheses."""
    depth, i, n = 0, start, len(source)
    while i < n:
        c = source[i]
        if source.startswith('R"(', i):
            i = source.index(')"', i) + 2
            continue
        if c == '"':
            i += 1
            while source[i] != '"':
                i += 2 if source[i] == "\\" else 1
            i += 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return source[start:i]
            depth -= 1
        elif c == "," and depth == 0:
            return source[start:i]
        i += 1
    raise AssertionError("unterminated route expression")


def evaluate_route(expr, constants):
    """Concatenates the string literals and constants of a route expression."""
    out = ""
    for m in re.finditer(r'R"\((.*?)\)"|"((?:[^"\\]|\\.)*)"|\b(k\w+)\b', expr, re.S):
        if m.group(1) is not None:
            out += m.group(1)
        elif m.group(2) is not None:
            out += m.group(2).encode().decode("unicode_escape")
        else:
            assert m.group(3) in constants, f"unknown constant {m.group(3)} in route {expr!r}"
            out += constants[m.group(3)]
    return out


def normalize_regex_route(route):
    """'/experiments/([a-z0-9]...)/logs' -> '/experiments/{}/logs'."""
    out, depth = "", 0
    for c in route:
        if c == "(":
            if depth == 0:
                out += "{}"
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0:
            out += c
    return out


def registered_routes():
    """{(method, normalized path): (file, raw regex)} for every route the
    service registers."""
    routes = {}
    for folder in ("service/api", "service/agentrpc"):
        constants = folder_constants(folder)
        for name in sorted(os.listdir(os.path.join(REPO, folder))):
            if not name.endswith(".cc"):
                continue
            rel = f"{folder}/{name}"
            src = read_source(rel)
            for m in re.finditer(r"\bserver\.(Get|Post|Delete|Put|Patch|Options)\(\s*", src):
                raw = evaluate_route(route_expression(src, m.end()), constants)
                routes[(m.group(1).lower(), normalize_regex_route(raw))] = (rel, raw)
    return routes


def test_every_registered_route_is_documented_and_nothing_else(doc):
    code = registered_routes()
    assert len(code) >= 9, f"found too few routes in the sources, is the parser broken? {code}"
    documented = {(m, re.sub(r"{\w+}", "{}", p)) for p, m, _, _ in operations(doc)}
    missing = {k: v for k, v in code.items() if k not in documented}
    assert not missing, f"routes registered in the code but not in schema/openapi.yaml: {missing}"
    extra = documented - set(code)
    assert not extra, f"routes in schema/openapi.yaml that the code does not register: {extra}"


def test_path_parameter_patterns_match_the_routes(doc):
    v = Validator(doc)
    code = registered_routes()
    for path, method, op, shared in operations(doc):
        params = {p["name"]: p for p in (v.resolve(p) for p in shared + op.get("parameters", []))
                  if p["in"] == "path"}
        if not params:
            continue
        rel, raw = code[(method, re.sub(r"{\w+}", "{}", path))]
        groups = re.findall(r"\(([^()]*)\)", raw)
        names = re.findall(r"{(\w+)}", path)
        assert len(groups) == len(names), (path, raw)
        for name, group in zip(names, groups):
            assert params[name]["schema"]["pattern"] == f"^{group}$", \
                f"{method} {path}: {name} pattern {params[name]['schema']['pattern']} vs {group} in {rel}"


def test_patterns_match_the_sources(doc):
    # The document's enums are checked against the code's name tables by
    # tests/unit/names_test.cc (OpenApisEnumsAreTheCodesNames); here, the
    # patterns the code writes as regular expressions.
    s = doc["components"]["schemas"]
    spec_cc = (read_source("service/core/spec.cc") + read_source("service/core/spec_values.cc")
               + read_source("service/core/spec_checker.h"))
    regexes = dict(re.findall(r'const std::regex (k\w+)\("([^"]*)"\);', spec_cc))
    assert s["ExperimentSpec"]["properties"]["id"]["pattern"] == f"^{regexes['kIdPattern']}$"
    assert s["Resources"]["properties"]["partition"]["pattern"] == f"^{regexes['kPartitionPattern']}$"
    assert s["RoleResources"]["properties"]["partition"]["pattern"] == f"^{regexes['kPartitionPattern']}$"
    for name in ("account", "qos"):
        assert s["Resources"]["properties"][name]["pattern"] == f"^{regexes['kSlurmNamePattern']}$"
    assert f"interface:{regexes['kInterfacePattern']}" in s["Network"]["properties"]["address"]["pattern"]
    api_id = folder_constants("service/api")["kIdPattern"]
    assert api_id == f"({regexes['kIdPattern']})", "the API's id pattern differs from the spec's"
    assert doc["components"]["parameters"]["ExperimentId"]["schema"]["pattern"] == f"^{regexes['kIdPattern']}$"

    logs_cc = read_source("service/api/logs_api.cc")
    task_re = re.search(r'std::regex kTask\("([^"]*)"\)', logs_cc).group(1)
    task_param = next(p for p in doc["paths"]["/experiments/{id}/logs"]["get"]["parameters"]
                      if p["name"] == "task")
    assert task_param["schema"]["pattern"] == f"^{task_re}$"


# ------------------------------------------------- real responses vs document

class Http:
    """Raw HTTP against a tfslurmd: status, headers and body, nothing hidden."""

    def __init__(self, url, token=None):
        self.url = url
        self.token = token

    def __call__(self, method, path, body=None, headers=None, timeout=60):
        hdrs = dict(headers or {})
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        if data is not None:
            hdrs.setdefault("Content-Type", "application/json")
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()


class Contract:
    """Checks real exchanges against the operation the document describes."""

    def __init__(self, document, http):
        self.doc = document
        self.v = Validator(document)
        self.http = http
        self.seen = set()  # (method, template, status) checked

    def call(self, method, template, path, body=None, expect=None, headers=None):
        status, hdrs, payload = self.http(method, path, body, headers)
        if expect is not None:
            allowed = {expect} if isinstance(expect, int) else set(expect)
            assert status in allowed, f"{method} {path}: {status}, wanted {allowed}: {payload[:500]!r}"
        op = self.doc["paths"][template][method.lower()]
        assert str(status) in op["responses"], \
            f"{method} {path} answered {status}, which {template} does not document: {payload[:500]!r}"
        response = self.v.resolve(op["responses"][str(status)])
        self.seen.add((method, template, status))
        content = response.get("content")
        if not content:
            return status, hdrs, payload
        ctype = hdrs.get("Content-Type", "")
        assert ctype in content, f"{method} {path} {status}: Content-Type {ctype!r} not in {list(content)}"
        for name, header in response.get("headers", {}).items():
            header = self.v.resolve(header)
            if name in ("Location", "X-Tfslurm-Log-Offset", "WWW-Authenticate", "ETag"):
                assert name in hdrs, f"{method} {path} {status}: documented header {name} missing"
                self.v.check(int(hdrs[name]) if header["schema"].get("type") == "integer" else hdrs[name],
                             header["schema"], f"header {name} of {method} {path}")
        if ctype == "application/json":
            value = json.loads(payload)
            self.v.check(value, content[ctype]["schema"], f"{method} {path} {status}")
            return status, hdrs, value
        return status, hdrs, payload.decode()

    def request_is_valid(self, template, method, body):
        schema = self.doc["paths"][template][method]["requestBody"]["content"]["application/json"]["schema"]
        return self.v.errors(body, schema)


SHORT = {"command": ["true"], "cluster": {"worker": 1},
         "resources": {"nodes": 1, "tasks_per_node": 1, "time_limit": "00:05:00"},
         "checkpoint": {"signal_grace_s": 10}}


def test_real_responses_match_the_document(service, doc):
    c = Contract(doc, Http(service.url))
    assert not c.request_is_valid("/experiments", "post", SHORT)

    _, _, health = c.call("GET", "/healthz", "/healthz", expect=200)
    assert health == {"status": "ok"}
    _, _, version = c.call("GET", "/version", "/version", expect=200)
    assert version["slurm"]["libslurm"] == version["slurm"]["slurmctld"], version

    # Dry run: nothing stored.
    _, _, dry = c.call("POST", "/experiments", "/experiments?dry_run=true", SHORT, expect=200)
    assert dry["spec"]["resources"]["time_limit"] == "00:05:00"
    assert dry["sbatch"].startswith("#!/bin/bash\n")
    assert c.call("GET", "/experiments/{id}", f"/experiments/{dry['id']}", expect=404)

    # A real one.
    spec = dict(SHORT, id="oa-real")
    _, hdrs, created = c.call("POST", "/experiments", "/experiments", spec, expect=201)
    assert hdrs["Location"] == "/experiments/oa-real"
    assert created["state"] == "queued" and created["owner"] == "local"
    assert isinstance(created["slurm_job_id"], int)

    _, _, listed = c.call("GET", "/experiments", "/experiments", expect=200)
    assert [e["id"] for e in listed["experiments"]] == ["oa-real"] and listed["total"] == 1
    c.call("GET", "/experiments", "/experiments?state=queued,starting,running&limit=10&offset=0", expect=200)
    c.call("GET", "/experiments/{id}", "/experiments/oa-real", expect=200)

    done = service.wait_state("oa-real", ("succeeded", "failed"), timeout=120)
    assert done["state"] == "succeeded", done["reason"]
    _, _, view = c.call("GET", "/experiments/{id}", "/experiments/oa-real", expect=200)
    assert view["tasks"] and view["events"] and view["attempts"][0]["end_reason"] == "succeeded"
    _, _, listed = c.call("GET", "/experiments", "/experiments?state=succeeded", expect=200)
    assert listed["experiments"][0]["id"] == "oa-real"

    _, _, script = c.call("GET", "/experiments/{id}/sbatch", "/experiments/oa-real/sbatch", expect=200)
    assert "#SBATCH --job-name=tfx-oa-real-a1" in script
    c.call("GET", "/experiments/{id}/sbatch", "/experiments/oa-real/sbatch?attempt=2", expect=400)
    c.call("GET", "/experiments/{id}/logs", "/experiments/oa-real/logs?task=worker:0", expect=(200, 404))
    c.call("GET", "/experiments/{id}/logs", "/experiments/oa-real/logs?tail=5", expect=(200, 404))
    c.call("GET", "/experiments/{id}/logs", "/experiments/oa-real/logs?task=worker:7", expect=400)
    c.call("GET", "/experiments/{id}/logs", "/experiments/oa-real/logs?tail=1&offset=0", expect=400)
    _, _, scalars = c.call("GET", "/experiments/{id}/metrics", "/experiments/oa-real/metrics", expect=200)
    assert scalars["tags"] == [] and scalars["tensorboard"]["logdir"] == done["model_dir"], scalars
    c.call("GET", "/experiments/{id}/metrics", "/experiments/oa-real/metrics?tag=a&tag=b", expect=200)
    c.call("GET", "/experiments/{id}/metrics", "/experiments/oa-real/metrics?" + "&".join(f"tag=t{i}" for i in range(101)),
           expect=400)

    # Errors.
    c.call("POST", "/experiments", "/experiments", spec, expect=409)
    _, _, err = c.call("POST", "/experiments", "/experiments?dry_run=true",
                       dict(SHORT, resources={"nodes": 0}), expect=400)
    assert any(f["field"] == "resources.nodes" for f in err["error"]["fields"]), err
    c.call("POST", "/experiments", "/experiments", b"{not json", expect=400)
    c.call("POST", "/experiments", "/experiments", b"[" * 100 + b"]" * 100, expect=400)
    c.call("POST", "/experiments", "/experiments", b"", expect=400)
    c.call("POST", "/experiments", "/experiments", b" " * (1 << 20 | 1), expect=413)
    c.call("GET", "/experiments", "/experiments?state=bogus", expect=400)
    c.call("GET", "/experiments", "/experiments?limit=0", expect=400)
    c.call("GET", "/experiments/{id}", "/experiments/oa-unknown", expect=404)
    c.call("GET", "/experiments/{id}/sbatch", "/experiments/oa-unknown/sbatch", expect=404)
    c.call("GET", "/experiments/{id}/logs", "/experiments/oa-unknown/logs", expect=404)
    c.call("GET", "/experiments/{id}/metrics", "/experiments/oa-unknown/metrics", expect=404)
    c.call("DELETE", "/experiments/{id}", "/experiments/oa-unknown", expect=404)
    c.call("POST", "/experiments/{id}/resume", "/experiments/oa-unknown/resume", b"", expect=404)
    c.call("POST", "/experiments/{id}/delete", "/experiments/oa-unknown/delete", b"", expect=404)
    c.call("DELETE", "/experiments/{id}", "/experiments/oa-real", expect=409)
    # An id outside the pattern is no route at all; so is an unknown path.
    status, _, payload = c.http("GET", "/experiments/Not-An-Id")
    assert status == 404 and json.loads(payload)["error"]["code"] == "not_found"
    c.v.check(json.loads(payload), {"$ref": "#/components/schemas/Error"}, "404 of an unknown route")

    # Resume: a new attempt (503 while the finished job is still completing).
    status = wait_for(lambda: (lambda s: s if s != 503 else None)(
        c.call("POST", "/experiments/{id}/resume", "/experiments/oa-real/resume", b"",
               expect=(202, 503))[0]), 60, "resume to be accepted", interval=1)
    assert status == 202
    _, _, view = c.call("GET", "/experiments/{id}", "/experiments/oa-real", expect=200)
    assert view["attempt"] == 2 and len(view["attempts"]) == 2
    c.call("POST", "/experiments/{id}/resume", "/experiments/oa-real/resume", b"", expect=(409, 503))
    # A change the checkpoint would not survive, and one that is not valid.
    c.call("POST", "/experiments/{id}/resume", "/experiments/oa-real/resume",
           {"changes": {"framework": "pytorch"}}, expect=(400, 409, 503))
    c.call("POST", "/experiments/{id}/resume", "/experiments/oa-real/resume", {"bogus": 1}, expect=400)
    # An open experiment is not deleted (409, naming its state).
    c.call("POST", "/experiments/{id}/delete", "/experiments/oa-real/delete", b"", expect=(409, 503))
    # Cancel it (it may already have succeeded: then 409).
    c.call("DELETE", "/experiments/{id}", "/experiments/oa-real", expect=(200, 409))
    service.wait_state("oa-real", ("succeeded", "cancelled"), timeout=60)
    # Resumed with a change, then deleted with its files.
    status = wait_for(lambda: (lambda s: s if s != 503 else None)(
        c.call("POST", "/experiments/{id}/resume", "/experiments/oa-real/resume",
               {"changes": {"env": {"OA": "1"}}}, expect=(202, 503))[0]), 60, "resume with changes", interval=1)
    _, _, view = c.call("GET", "/experiments/{id}", "/experiments/oa-real", expect=200)
    assert view["spec_revision"] == 2 and view["attempts"][-1]["spec_revision"] == 2, view
    c.call("DELETE", "/experiments/{id}", "/experiments/oa-real", expect=(200, 409))
    service.wait_state("oa-real", ("succeeded", "cancelled"), timeout=60)

    # Dashboard.
    _, hdrs, _ = c.call("GET", "/", "/", expect=200)
    c.call("GET", "/", "/", headers={"If-None-Match": hdrs["ETag"]}, expect=304)
    c.call("GET", "/ui/{path}", "/ui/app.js", expect=200)
    c.call("GET", "/ui/{path}", "/ui/views/list.js", expect=200)
    c.call("GET", "/ui/{path}", "/ui/nope.js", expect=404)

    # The agent endpoint, JSON form.
    msg = {"task": {"experiment_id": "oa-unknown", "attempt": 1, "secret": "x", "proc_id": 0},
           "register": {"slurm_job_id": "1", "node_name": "node1", "address": "node1", "port": 1}}
    assert not c.request_is_valid("/agent/v1/message", "post", msg)
    _, _, refused = c.call("POST", "/agent/v1/message", "/agent/v1/message?wait_s=1", msg, expect=200)
    assert refused["refused"].get("permanent") is True, refused  # unknown experiment: final
    beat = {"task": msg["task"], "heartbeat": {}}
    c.call("POST", "/agent/v1/message", "/agent/v1/message", beat, expect=404)
    c.call("POST", "/agent/v1/message", "/agent/v1/message", {"task": msg["task"]}, expect=400)
    c.call("POST", "/agent/v1/message", "/agent/v1/message", {"bogus": 1}, expect=400)
    # A report for the ended attempt 1 of oa-real without its secret: the
    # answer of a missing experiment, not the 409 its secret would get
    # (issue 41: a stranger learns nothing of oa-real's state).
    old = {"task": {"experiment_id": "oa-real", "attempt": 1, "secret": "x", "proc_id": 0}, "heartbeat": {}}
    _, _, stranger = c.call("POST", "/agent/v1/message", "/agent/v1/message", old, expect=404)
    assert stranger["error"]["message"] == "no experiment 'oa-real' with attempt 1 and this secret", stranger

    # Deleted with its files, last, as nothing above may need it.
    wait_for(lambda: c.call("POST", "/experiments/{id}/delete", "/experiments/oa-real/delete?files=true", b"",
                            expect=(200, 503))[0] == 200, 60, "delete to be accepted", interval=1)

    assert len(c.seen) >= 25, sorted(c.seen)


def test_sweep_responses_match_the_document(service, doc):
    c = Contract(doc, Http(service.url))
    sweep = {"id": "oa-sweep", "experiment": SHORT, "parameters": {"env.OA": {"values": [1, 2, 3]}},
             "max_concurrent": 1, "objective": {"tag": "loss", "goal": "min"},
             "early_stopping": {"rule": "asha", "rungs": [10]}}
    _, hdrs, created = c.call("POST", "/sweeps", "/sweeps", sweep, expect=201)
    assert hdrs["Location"] == "/sweeps/oa-sweep"
    assert created["trials_total"] == 3 and len(created["trials"]) == 1, created
    c.call("POST", "/sweeps", "/sweeps", sweep, expect=409)
    _, _, bad = c.call("POST", "/sweeps", "/sweeps", dict(sweep, id="oa-bad", max_concurrent=0), expect=400)
    assert any(f["field"] == "max_concurrent" for f in bad["error"]["fields"]), bad
    c.call("POST", "/sweeps", "/sweeps", b"{not json", expect=400)
    _, _, listed = c.call("GET", "/sweeps", "/sweeps", expect=200)
    assert [s["id"] for s in listed["sweeps"]] == ["oa-sweep"], listed
    c.call("GET", "/sweeps/{id}", "/sweeps/oa-sweep", expect=200)
    c.call("GET", "/sweeps/{id}", "/sweeps/oa-unknown", expect=404)
    c.call("POST", "/sweeps/{id}/cancel", "/sweeps/oa-unknown/cancel", b"", expect=404)
    _, _, cancelled = c.call("POST", "/sweeps/{id}/cancel", "/sweeps/oa-sweep/cancel", b"", expect=200)
    assert cancelled["state"] == "cancelled", cancelled
    c.call("POST", "/sweeps/{id}/cancel", "/sweeps/oa-sweep/cancel", b"", expect=409)
    done = wait_for(lambda: (lambda s: s if all(t["state"] != "running" for t in s["trials"]) else None)(
        c.call("GET", "/sweeps/{id}", "/sweeps/oa-sweep", expect=200)[2]), 60, "the trial to end", interval=0.5)
    assert len(done["trials"]) == 1, "no trial starts after a cancel"
    c.call("POST", "/sweeps/{id}/delete", "/sweeps/oa-unknown/delete", b"", expect=404)
    _, _, deleted = c.call("POST", "/sweeps/{id}/delete", "/sweeps/oa-sweep/delete?files=true", b"", expect=200)
    assert [d["id"] for d in deleted["experiments_deleted"]] == ["oa-sweep-1"], deleted
    c.call("GET", "/sweeps/{id}", "/sweeps/oa-sweep", expect=404)


def create_token(service, user, admin=False):
    args = [os.path.join(BIN, "tfslurmd"), "--db", service.db, "token", "create", "--user", user]
    out = subprocess.run(args + (["--admin"] if admin else []), stdout=subprocess.PIPE, text=True,
                         check=True)
    return out.stdout.strip()


def test_auth_responses_match_the_document(service_factory, doc):
    service = service_factory(auth=True)
    alice = Contract(doc, Http(service.url, create_token(service, "alice")))
    bob = Contract(doc, Http(service.url, create_token(service, "bob")))
    nobody = Contract(doc, Http(service.url))
    forged = Contract(doc, Http(service.url, "tfs_forged"))

    nobody.call("GET", "/healthz", "/healthz", expect=200)
    nobody.call("GET", "/version", "/version", expect=401)
    alice.call("GET", "/version", "/version", expect=200)
    for c in (nobody, forged):
        _, hdrs, body = c.call("GET", "/experiments", "/experiments", expect=401)
        assert hdrs.get("WWW-Authenticate") == "Bearer" and body["error"]["code"] == "unauthenticated"
        c.call("POST", "/experiments", "/experiments", SHORT, expect=401)

    _, _, minted = alice.call("POST", "/tokens", "/tokens", {}, expect=201)
    assert minted["user"] == "alice" and not minted["admin"]
    bob.call("POST", "/tokens", "/tokens", {"user": "alice"}, expect=403)
    bob.call("POST", "/tokens", "/tokens", {"user": 5}, expect=400)

    sleeper = dict(SHORT, id="oa-alice", command=["sleep", "120"], restart={"max_restarts": 0})
    _, _, mine = alice.call("POST", "/experiments", "/experiments", sleeper, expect=201)
    assert mine["owner"] == "alice"
    _, _, listed = bob.call("GET", "/experiments", "/experiments", expect=200)
    assert listed["experiments"] == []
    for method, template, body in [("GET", "/experiments/{id}", None),
                                   ("GET", "/experiments/{id}/sbatch", None),
                                   ("GET", "/experiments/{id}/logs", None),
                                   ("GET", "/experiments/{id}/metrics", None),
                                   ("DELETE", "/experiments/{id}", None),
                                   ("POST", "/experiments/{id}/resume", b""),
                                   ("POST", "/experiments/{id}/delete", b"")]:
        _, _, err = bob.call(method, template, template.replace("{id}", "oa-alice"), body, expect=404)
        assert err["error"]["code"] == "not_found", "as if the id did not exist"

    # A running experiment: live task counts in the list, heartbeats in the view.
    def running():
        view = alice.call("GET", "/experiments/{id}", "/experiments/oa-alice", expect=200)[2]
        return view if view["state"] == "running" and view["tasks"][0]["heartbeat_age_s"] is not None else None
    view = wait_for(running, 120, "oa-alice to run", interval=0.5)
    # (slurm_state may still say PENDING: Slurm is polled, the agents report at once.)
    assert view["tasks"][0]["state"] == "running", view
    _, _, listed = alice.call("GET", "/experiments", "/experiments?state=running", expect=200)
    assert listed["experiments"][0]["task_counts"]["worker"]["running"] == 1, listed
    _, _, cancelled = alice.call("DELETE", "/experiments/{id}", "/experiments/oa-alice", expect=200)
    assert cancelled["state"] == "cancelled", cancelled
    alice.call("DELETE", "/experiments/{id}", "/experiments/oa-alice", expect=409)


# ----------------------------------------------- spec limits, both directions

# Each: (spec overrides, field the service names). All are single-field
# violations the document can express.
INVALID = [
    ({"id": "Bad"}, "id"),
    ({"id": "a" * 64}, "id"),
    ({"id": "-leading-dash"}, "id"),
    ({"command": []}, "command"),
    ({"command": "true"}, "command"),
    ({"command": [1]}, "command[0]"),
    ({"workdir": "relative/dir"}, "workdir"),
    ({"env": {"1X": "v"}}, "env.1X"),
    ({"env": {"A": 1}}, "env.A"),
    ({"env": []}, "env"),
    ({"env": {"TF_CONFIG": "{}"}}, "env.TF_CONFIG"),
    ({"env": {"SLURM_JOB_ID": "1"}}, "env.SLURM_JOB_ID"),
    ({"env": {"TFSLURM_ROLE": "ps"}}, "env.TFSLURM_ROLE"),
    ({"env": {"CUDA_VISIBLE_DEVICES": "0"}}, "env.CUDA_VISIBLE_DEVICES"),
    ({"cluster": {"worker": 1, "chief": 2}}, "cluster.chief"),
    ({"cluster": {"worker": 1, "evaluator": 2}}, "cluster.evaluator"),
    ({"cluster": {"worker": -1}}, "cluster.worker"),
    ({"cluster": {"worker": 1, "gpu": 1}}, "cluster.gpu"),
    ({"cluster": {"worker": "1"}}, "cluster.worker"),
    ({"placement": "zig"}, "placement"),
    ({"placement": ["boss"]}, "placement[0]"),
    ({"resources": {"nodes": 0}}, "resources.nodes"),
    ({"resources": {"nodes": 10001}}, "resources.nodes"),
    ({"resources": {"tasks_per_node": 0}}, "resources.tasks_per_node"),
    ({"resources": {"cpus_per_task": 1025}}, "resources.cpus_per_task"),
    ({"resources": {"gpus_per_node": 65}}, "resources.gpus_per_node"),
    ({"resources": {"gpus_per_task": 65}}, "resources.gpus_per_task"),
    ({"resources": {"gpus_per_task": -1}}, "resources.gpus_per_task"),
    ({"resources": {"mem_per_task_mb": "lots"}}, "resources.mem_per_task_mb"),
    ({"resources": {"mem_per_task_mb": 0}}, "resources.mem_per_task_mb"),
    ({"resources": {"time_limit": "soon"}}, "resources.time_limit"),
    ({"resources": {"time_limit": "1:2:3:4"}}, "resources.time_limit"),
    ({"resources": {"time_limit": 60}}, "resources.time_limit"),
    ({"resources": {"partition": "no such!"}}, "resources.partition"),
    ({"resources": {"memory": 1}}, "resources.memory"),
    ({"network": {"address": "eth0"}}, "network.address"),
    ({"network": {"address": "interface:"}}, "network.address"),
    ({"network": {"port": 1}}, "network.port"),
    ({"success": "sometimes"}, "success"),
    ({"restart": {"max_restarts": 101}}, "restart.max_restarts"),
    ({"restart": {"on": ["never"]}}, "restart.on[0]"),
    ({"restart": {"on": "timeout"}}, "restart.on"),
    ({"restart": {"backoff_s": -1}}, "restart.backoff_s"),
    ({"checkpoint": {"signal_grace_s": 3601}}, "checkpoint.signal_grace_s"),
    ({"checkpoint": {"every": 1}}, "checkpoint.every"),
    ({"model_dir": "relative"}, "model_dir"),
    ({"model_dir": 5}, "model_dir"),
    ({"bogus": 1}, "bogus"),
    ({"framework": "mxnet"}, "framework"),
    ({"roles": {"ps": {"nodes": 0}}}, "roles.ps.nodes"),
    ({"roles": {"ps": {"partition": "no such!"}}}, "roles.ps.partition"),
    ({"roles": {"ps": {"constraint": "a b"}}}, "roles.ps.constraint"),
    ({"roles": {"ps": {"mem_per_task_mb": 0}}}, "roles.ps.mem_per_task_mb"),
    ({"roles": {"ps": {"time_limit": "5"}}}, "roles.ps.time_limit"),
    ({"roles": {"master": {}}}, "roles.master"),
    ({"resources": {"account": ""}}, "resources.account"),
    ({"resources": {"account": "tfs research"}}, "resources.account"),
    ({"resources": {"account": "a,b"}}, "resources.account"),
    ({"resources": {"qos": "high'"}}, "resources.qos"),
    ({"resources": {"reservation": "r1,"}}, "resources.reservation"),
    ({"resources": {"exclude": "node1 node2"}}, "resources.exclude"),
    ({"resources": {"nodelist": "node[1-"}}, "resources.nodelist"),
    ({"resources": {"constraint": "a b"}}, "resources.constraint"),
    ({"resources": {"exclusive": "yes"}}, "resources.exclusive"),
    ({"roles": {"ps": {"account": "x"}}}, "roles.ps.account"),
    ({"roles": {"ps": {"exclusive": 1}}}, "roles.ps.exclusive"),
]

# Valid at the edges of what the document allows (and fitting the local
# 3-node cluster, so that the dry run's fit check passes too).
VALID = [
    {"id": "a" * 63},
    {"id": "0.x_y-z"},
    {"workdir": "/tmp"},
    {"env": {"DATA_DIR": "/scratch", "_x1": "", "TF_CONFIGX": "a", "MY_SLURM_X": "b", "SLURMX": "c"}},
    {"placement": "pack"},
    {"placement": ["worker"]},
    {"resources": {"nodes": 1, "tasks_per_node": 1, "time_limit": "5", "mem_per_task_mb": 1000}},
    {"resources": {"nodes": 1, "tasks_per_node": 1, "time_limit": "5:00", "mem_per_task_mb": "auto"}},
    {"resources": {"nodes": 1, "tasks_per_node": 1, "time_limit": "0-00:05", "partition": "debug",
                   "cpus_per_task": 4, "gpus_per_node": 64}},
    {"resources": {"nodes": 1, "tasks_per_node": 1, "time_limit": "5", "gpus_per_node": 0, "gpus_per_task": 64}},
    {"resources": {"nodes": 1, "tasks_per_node": 1, "time_limit": "5", "account": "tfs-research",
                   "qos": "normal", "reservation": "r1,r2", "exclude": "node[2-3]", "nodelist": "node1",
                   "constraint": "bigmem", "exclusive": True}},
    {"network": {"address": "fqdn"}},
    {"network": {"address": "interface:lo"}},
    {"success": "worker0"},
    {"success": "all_workers"},
    {"restart": {"max_restarts": 100, "on": [], "backoff_s": 3600}},
    {"restart": {"max_restarts": 0, "on": ["timeout"], "backoff_s": 0}},
    {"checkpoint": {"signal_grace_s": 0}},
    {"model_dir": "auto"},
    {"id": "oa-model", "model_dir": "{output_root}/oa-model/model"},
    {"cluster": {"ps": 1, "worker": 1},
     "roles": {"ps": {"partition": "psmem", "nodes": 1, "tasks_per_node": 1, "cpus_per_task": 2,
                      "gpus_per_node": 0, "mem_per_task_mb": "auto", "constraint": "bigmem"}}},
    {"cluster": {"ps": 2, "worker": 1}, "roles": {"ps": {"partition": "psmem", "mem_per_task_mb": 1000}}},
]


def test_spec_limits_agree_with_the_service(service, doc):
    c = Contract(doc, Http(service.url))
    disagreements = []
    for overrides, field in INVALID:
        spec = dict(SHORT, **overrides)
        if not c.request_is_valid("/experiments", "post", spec):
            disagreements.append(f"document allows {overrides} but the service refuses {field}")
        status, _, body = c.call("POST", "/experiments", "/experiments?dry_run=true", spec)
        fields = [f["field"] for f in body["error"]["fields"]] if status == 400 else []
        if status != 400 or field not in fields:
            disagreements.append(f"{overrides}: service answered {status} {fields or body}, "
                                 f"wanted 400 naming {field}")
    for overrides in VALID:
        # A model_dir outside the output root is refused when jobs run as
        # root (personal mode as root, as here): it goes in the experiment's own.
        spec = json.loads(json.dumps(dict(SHORT, **overrides)).replace("{output_root}", service.output_root))
        errs = c.request_is_valid("/experiments", "post", spec)
        if errs:
            disagreements.append(f"document refuses {overrides}: {errs}")
        status, _, body = c.call("POST", "/experiments", "/experiments?dry_run=true", spec)
        if status != 200:
            disagreements.append(f"service refuses {overrides}: {status} {body}")
    assert not disagreements, "\n".join(disagreements)
