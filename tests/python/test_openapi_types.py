"""The client's types (client/python/src/tfslurm/types.py) against the API's
own description, schema/openapi.yaml, so that they cannot drift: each
dataclass names the schema it stands for, and

- its fields are exactly the schema's properties (a property the client
  lacks, or a field the API does not have, fails);
- each field's type matches the property's: integer int, number float,
  string str (or a Literal of exactly the enum's values), boolean bool,
  arrays List, objects the dataclass of their schema or a Dict, date-times
  datetime;
- a nullable property is Optional, and a property the schema does not
  require has a default (an answer without it still reads);
- every dataclass of the module is checked (a new one needs its schema).
"""

import dataclasses
import datetime
import os
import typing

import pytest
import yaml

from tfslurm import types

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OPENAPI = os.path.join(REPO, "schema", "openapi.yaml")


@pytest.fixture(scope="module")
def document():
    with open(OPENAPI) as f:
        return yaml.safe_load(f)


def resolve(document, pointer):
    node = document
    for part in pointer.lstrip("#/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def flatten(document, schema):
    """A schema with its $ref followed and allOf merged: (properties, required, nullable)."""
    if "$ref" in schema:
        return flatten(document, resolve(document, schema["$ref"]))
    properties, required = dict(schema.get("properties", {})), set(schema.get("required", []))
    nullable = bool(schema.get("nullable"))
    for part in schema.get("allOf", []):
        p, r, n = flatten(document, part)
        properties.update(p)
        required |= r
        nullable = nullable or n
    return properties, required, nullable


def dataclasses_of_module():
    return [c for c in vars(types).values()
            if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == types.__name__]


def hints(cls):
    return typing.get_type_hints(cls, vars(types), {"Client": object})


def public_fields(cls):
    return [f for f in dataclasses.fields(cls) if not f.name.startswith("_")]


def strip_optional(tp):
    if typing.get_origin(tp) is typing.Union and type(None) in typing.get_args(tp):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True
    return tp, False


def mismatch(document, prop, tp, where):
    """Why `tp` does not fit schema `prop`; None when it does."""
    if "$ref" in prop:
        target = resolve(document, prop["$ref"])
        if "properties" in target or "allOf" in target:
            if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
                return f"{where}: {prop['$ref']} is an object; the field is {tp}"
            # The class of that schema, or of the one it extends (allOf's first part:
            # ExperimentSpecCanonical is an ExperimentSpec with more required).
            extends = [p["$ref"] for p in target.get("allOf", [])[:1] if "$ref" in p]
            if tp._schema not in [prop["$ref"], *extends]:
                return f"{where}: the field's class stands for {tp._schema}, not {prop['$ref']}"
            return None
        return mismatch(document, {**target, **{k: v for k, v in prop.items() if k != "$ref"}}, tp, where)
    if "allOf" in prop:  # nullable: true next to allOf: [$ref]
        return mismatch(document, prop["allOf"][0], tp, where)
    if "oneOf" in prop:
        options = typing.get_args(tp) if typing.get_origin(tp) is typing.Union else (tp,)
        for option_schema in prop["oneOf"]:
            if not any(mismatch(document, option_schema, o, where) is None for o in options):
                return f"{where}: no part of {tp} fits the option {option_schema}"
        return None
    kind = prop.get("type")
    if "enum" in prop:
        if typing.get_origin(tp) is not typing.Literal:
            return f"{where}: an enum {prop['enum']} must be a Literal, got {tp}"
        if set(typing.get_args(tp)) != set(prop["enum"]):
            return f"{where}: Literal{list(typing.get_args(tp))} != enum {prop['enum']}"
        return None
    if kind == "string":
        want = datetime.datetime if prop.get("format") == "date-time" else str
        return None if tp is want else f"{where}: a {kind} ({prop.get('format', '')}) must be {want}, got {tp}"
    if kind in ("integer", "number", "boolean"):
        want = {"integer": int, "number": float, "boolean": bool}[kind]
        return None if tp is want else f"{where}: a {kind} must be {want.__name__}, got {tp}"
    if kind == "array":
        if typing.get_origin(tp) is not list:
            return f"{where}: an array must be a List, got {tp}"
        item_tp, item_optional = strip_optional(typing.get_args(tp)[0])
        item = prop["items"]
        if bool(item.get("nullable")) != item_optional:
            return f"{where}[]: nullable {item.get('nullable', False)} but Optional {item_optional}"
        return mismatch(document, item, item_tp, where + "[]")
    if kind == "object" or "properties" in prop:
        if "properties" in prop:
            if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
                return f"{where}: an object with properties must be a dataclass, got {tp}"
            return None  # checked as a class of its own (it names this schema)
        if typing.get_origin(tp) is not dict:
            return f"{where}: a free-form object must be a Dict, got {tp}"
        value_schema = prop.get("additionalProperties")
        if isinstance(value_schema, dict):
            return mismatch(document, value_schema, typing.get_args(tp)[1], where + "{}")
        return None if typing.get_args(tp)[1] is typing.Any else f"{where}: values must be Any"
    if not kind and "description" in prop and tp is not None:
        return None  # untyped (any JSON value)
    return f"{where}: cannot check {prop} against {tp}"


@pytest.mark.parametrize("cls", dataclasses_of_module(), ids=lambda c: c.__name__)
def test_each_type_matches_its_schema(document, cls):
    assert hasattr(cls, "_schema"), f"{cls.__name__} names no schema of schema/openapi.yaml"
    properties, required, _ = flatten(document, resolve(document, cls._schema))
    fields = {f.name: f for f in public_fields(cls)}
    assert set(fields) == set(properties), (
        f"{cls.__name__} vs {cls._schema}: fields the API lacks {sorted(set(fields) - set(properties))}, "
        f"properties the client lacks {sorted(set(properties) - set(fields))}")
    type_hints = hints(cls)
    problems = []
    for name, prop in properties.items():
        f = fields[name]
        tp, optional = strip_optional(type_hints[name])
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        nullable = bool(prop.get("nullable") or flatten(document, prop)[2])
        spec_side = issubclass(cls, types._Spec)
        if nullable and not optional:
            problems.append(f"{name}: nullable in the API but not Optional")
        if optional and not nullable and name in required and not spec_side:
            problems.append(f"{name}: Optional but the API neither allows null nor leaves it out")
        if name not in required and not has_default:
            problems.append(f"{name}: the API may leave it out, so it needs a default")
        if spec_side and name not in required and (f.default is not None or not optional):
            problems.append(f"{name}: a spec field the user may leave out must default to None")
        why = mismatch(document, prop, tp, name)
        if why:
            problems.append(why)
    assert not problems, f"{cls.__name__} vs {cls._schema}:\n  " + "\n  ".join(problems)


def test_the_check_fails_for_a_field_the_api_lacks_or_a_wrong_type(document):
    # The control: a class that drifted is caught.
    @dataclasses.dataclass
    class Drifted:
        _schema: typing.ClassVar[str] = "#/components/schemas/CheckpointInfo"
        step: str
        path: str
        size: int = 0

    properties, _, _ = flatten(document, resolve(document, Drifted._schema))
    assert set(f.name for f in public_fields(Drifted)) != set(properties)
    assert mismatch(document, properties["step"], str, "step") is not None
    assert mismatch(document, {"type": "string", "enum": ["a", "b"]}, typing.Literal["a"], "x") is not None


def test_every_schema_the_client_reads_has_a_type(document):
    named = {c._schema for c in dataclasses_of_module()}
    for schema in ("Experiment", "ExperimentSummary", "Attempt", "Task", "Event", "ExperimentMetrics",
                   "ScalarPoint", "Sweep", "SweepTrial", "SweepSummary", "DryRunResult", "ListResult",
                   "ExperimentSpec", "Resources", "RestartPolicy", "Checkpoint", "Progress", "Network",
                   "ClusterShape", "RoleResources", "PytorchOptions", "Version", "CheckpointInfo",
                   "RoleCounts"):
        assert "#/components/schemas/" + schema in named, schema
