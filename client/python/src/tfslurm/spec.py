"""Experiment and sweep specs from files, dicts or typed objects, as the JSON
the API takes.

A file is JSON when its name ends in .json, YAML otherwise, read as tfctl
reads it (client/spec_file.h): plain scalars are typed by YAML 1.2's core
schema (null, true/false, integers, floats) and everything else is a string,
so ``time_limit: 02:00:00`` and ``on: [timeout]`` mean what they mean in
JSON. (PyYAML alone reads YAML 1.1: ``on`` would become the boolean True
and ``02:00:00`` the number 7200.) YAML needs PyYAML; JSON needs nothing.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Mapping, Union

from .errors import SpecError
from .types import ExperimentSpec, _Spec

SpecLike = Union[str, "os.PathLike[str]", Mapping[str, Any], ExperimentSpec]


def load_spec_file(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """The spec in a JSON or YAML file, as a dict. SpecError names the file and line."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{name}: cannot read the spec file: {e}") from None
    if name.endswith(".json"):
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise SpecError(f"{name}: not valid JSON: {e}") from None
    else:
        doc = yaml_to_json(text, name)
    if not isinstance(doc, dict):
        raise SpecError(f"{name}: must hold one spec, a mapping of fields; got "
                        f"{type(doc).__name__}")
    return doc


def yaml_to_json(text: str, name: str = "<yaml>") -> Any:
    """YAML text as the JSON value tfctl makes of it (YAML 1.2 core schema)."""
    from . import _yaml
    return _yaml.load(text, name)


def as_spec_dict(spec: SpecLike) -> Dict[str, Any]:
    """A spec given as a path, a dict or a typed object, as the API's JSON."""
    if isinstance(spec, _Spec):
        return spec.to_dict()
    if isinstance(spec, Mapping):
        copy: Dict[str, Any] = json.loads(json.dumps(_plain(spec)))  # not the caller's dict
        return copy
    if isinstance(spec, (str, os.PathLike)):
        return load_spec_file(spec)
    raise TypeError(f"a spec is a path, a dict or an ExperimentSpec, not {type(spec).__name__}")


def _plain(value: Any) -> Any:
    """Typed parts inside a dict (resources=Resources(...)) as dicts too."""
    if isinstance(value, _Spec):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_-]*)*")


def changes_patch(fields: Mapping[str, Any]) -> Dict[str, Any]:
    """{"resources.time_limit": "04:00:00"} -> {"resources": {"time_limit": "04:00:00"}}:
    dotted names, as tfctl's --set writes them, as a JSON merge patch."""
    patch: Dict[str, Any] = {}
    for dotted, value in fields.items():
        if not _FIELD.fullmatch(dotted):
            raise ValueError(f"{dotted!r} is not a spec field path like resources.time_limit")
        node = patch
        *parents, last = dotted.split(".")
        for p in parents:
            child = node.setdefault(p, {})
            if not isinstance(child, dict):
                raise ValueError(f"{dotted!r}: {p} is set to a value and also has fields")
            node = child
        node[last] = _plain(value)
    return patch
