"""Specs from files, dicts and typed objects, as the JSON the API takes.
YAML is read as tfctl reads it (client/spec_file.cc, tests/client/spec_file_test.cc):
YAML 1.2's core schema, not PyYAML's 1.1."""
import json

import pytest

from tfslurm import ExperimentSpec, Resources, RestartPolicy, SpecError
from tfslurm.spec import as_spec_dict, changes_patch, load_spec_file, yaml_to_json


def test_yaml_scalars_are_typed_by_the_core_schema_as_tfctl_types_them():
    doc = yaml_to_json("""
time_limit: 02:00:00      # a string, not 7200 (YAML 1.1's base 60)
restart: {on: [timeout], max_restarts: 3}   # 'on' a key, not the boolean true
yes_no: [yes, no, on, off, true, False]
numbers: [0o17, 0x1f, -5, 1.5, 1e3, .5, 18446744073709551615, 18446744073709551616]
quoted: ["5", '7', "true"]
empty:
nulls: [~, null, Null]
""")
    assert doc["time_limit"] == "02:00:00"
    assert doc["restart"] == {"on": ["timeout"], "max_restarts": 3}
    assert doc["yes_no"] == ["yes", "no", "on", "off", True, False]
    assert doc["numbers"] == [15, 31, -5, 1.5, 1000.0, 0.5, 18446744073709551615, 1.8446744073709552e19]
    assert doc["quoted"] == ["5", "7", "true"]
    assert doc["empty"] is None and doc["nulls"] == [None, None, None]


def test_yaml_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("command: [python3\nresources: {nodes: 1}\n")
    with pytest.raises(SpecError, match=r"bad.yaml:\d+:\d+: not valid YAML"):
        load_spec_file(bad)
    with pytest.raises(SpecError, match="holds 2 YAML documents"):
        yaml_to_json("a: 1\n---\nb: 2\n", "two.yaml")
    with pytest.raises(SpecError, match="the file is empty"):
        yaml_to_json("# nothing\n", "empty.yaml")
    with pytest.raises(SpecError, match=r"k.yaml:1:3: a mapping key must be a plain name"):
        yaml_to_json("? [a, b]\n: 1\n", "k.yaml")


def test_json_and_yaml_files_give_the_same_spec(tmp_path):
    spec = {"id": "x", "command": ["python3", "train.py"], "resources": {"nodes": 2, "time_limit": "00:10:00"},
            "restart": {"on": ["timeout"]}}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    (tmp_path / "s.yaml").write_text("id: x\ncommand: [python3, train.py]\n"
                                     "resources: {nodes: 2, time_limit: 00:10:00}\nrestart: {on: [timeout]}\n")
    assert load_spec_file(tmp_path / "s.json") == load_spec_file(str(tmp_path / "s.yaml")) == spec
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(SpecError, match="must hold one spec"):
        load_spec_file(tmp_path / "list.json")
    with pytest.raises(SpecError, match="cannot read the spec file"):
        load_spec_file(tmp_path / "absent.yaml")


def test_typed_objects_give_the_json_with_nothing_left_unset():
    spec = ExperimentSpec(command=["python3", "train.py"], id="typed",
                          resources=Resources(nodes=2, mem_per_task_mb="auto"),
                          restart=RestartPolicy(on=["timeout", "preempted"]))
    assert as_spec_dict(spec) == {"command": ["python3", "train.py"], "id": "typed",
                                  "resources": {"nodes": 2, "mem_per_task_mb": "auto"},
                                  "restart": {"on": ["timeout", "preempted"]}}
    # Typed parts inside a dict, and a copy the caller's dict does not share.
    mine = {"command": ["x"], "resources": Resources(nodes=1)}
    out = as_spec_dict(mine)
    assert out == {"command": ["x"], "resources": {"nodes": 1}}
    out["command"].append("y")
    assert mine["command"] == ["x"]
    with pytest.raises(TypeError, match="a spec is a path, a dict or an ExperimentSpec"):
        as_spec_dict(42)


def test_changes_patch_reads_dotted_fields_as_tfctl_set_does():
    assert changes_patch({"resources.time_limit": "04:00:00", "restart.max_restarts": 5, "env.LR": None}) == {
        "resources": {"time_limit": "04:00:00"}, "restart": {"max_restarts": 5}, "env": {"LR": None}}
    with pytest.raises(ValueError, match="is not a spec field path"):
        changes_patch({"resources..nodes": 1})
    with pytest.raises(ValueError, match="is set to a value and also has fields"):
        changes_patch({"a": 1, "a.b": 2})
