"""YAML read as tfctl reads it (client/spec_file.cc), on PyYAML's parser.

PyYAML resolves plain scalars by YAML 1.1 (``on``/``yes`` are booleans,
``02:00:00`` is a sexagesimal integer, ``0o17`` a string); tfctl and the API
mean YAML 1.2's core schema. So the loader here replaces PyYAML's implicit
resolvers with the core schema's, and, as tfctl does, keeps a quoted scalar
a string, allows only plain names as keys, one document per file, and turns
an integer past 64 bits into a float and an infinity or NaN into a string.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .errors import SpecError

try:
    import yaml
except ImportError:  # the one optional dependency of reading YAML
    yaml = None  # type: ignore[assignment]

_NULL = re.compile(r"~|null|Null|NULL|")
_TRUE = re.compile(r"true|True|TRUE")
_FALSE = re.compile(r"false|False|FALSE")
_INT10 = re.compile(r"[-+]?[0-9]+")
_INT8 = re.compile(r"0o[0-7]+")
_INT16 = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def core_scalar(text: str) -> Any:
    """A plain scalar by YAML 1.2's core schema (tfctl's CoreScalar)."""
    if _NULL.fullmatch(text):
        return None
    if _TRUE.fullmatch(text):
        return True
    if _FALSE.fullmatch(text):
        return False
    number = None
    if _INT10.fullmatch(text):
        number = int(text, 10)
    elif _INT8.fullmatch(text):
        number = int(text[2:], 8)
    elif _INT16.fullmatch(text):
        number = int(text[2:], 16)
    if number is not None:
        if -(2 ** 63) <= number < 2 ** 64:
            return number
        return float(number)  # as JSON parsers do past 64 bits
    if _FLOAT.fullmatch(text):
        value = float(text)
        return value if math.isfinite(value) else text
    return text


def load(text: str, name: str) -> Any:
    if yaml is None:
        raise SpecError(f"{name}: reading YAML needs PyYAML (pip install pyyaml, or "
                        "'tfslurm[yaml]'); a .json spec file, a dict or an ExperimentSpec do not")
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        problem = getattr(e, "problem", None) or str(e)
        raise SpecError(f"{where}: not valid YAML: {problem}") from None
    if not nodes or _is_null(nodes[0]):
        raise SpecError(f"{name}: the file is empty; it must hold a spec")
    if len(nodes) > 1:
        raise SpecError(f"{name}: holds {len(nodes)} YAML documents; put one spec in the file")
    return _value(nodes[0], name)


def _is_null(node: Any) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.style is None and core_scalar(node.value) is None


def _value(node: Any, name: str) -> Any:
    if isinstance(node, yaml.ScalarNode):
        # Only plain scalars are typed: "5" stays a string, as in JSON.
        return core_scalar(node.value) if node.style is None else node.value
    if isinstance(node, yaml.SequenceNode):
        return [_value(item, name) for item in node.value]
    if isinstance(node, yaml.MappingNode):
        out = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                mark = key.start_mark
                raise SpecError(f"{name}:{mark.line + 1}:{mark.column + 1}: a mapping key must be "
                                "a plain name, like `cluster`")
            out[key.value] = _value(value, name)
        return out
    raise SpecError(f"{name}: an unexpected YAML node {type(node).__name__}")
