"""The config's strict records: what they accept, every problem at once, and no pydantic on the way.

The expected problems are the ones pydantic reported for the same input when it validated the file
(type, key path, message, value found), so the messages of ``nexus.config._load`` stay as they were.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nexus.config import AdapterConfig, AgentLimits, NexusConfig, ToolPolicy
from nexus.config._record import Record, RecordError, setting

SRC = Path(__file__).resolve().parents[2] / "src"


def _problems(data: Any) -> list[tuple[str, tuple[str | int, ...], str, Any]]:
    with pytest.raises(RecordError) as info:
        NexusConfig.model_validate(data)
    return [(p["type"], p["loc"], p["msg"], p["input"]) for p in info.value.errors()]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"agent": {"max_iterations": "25"}}, [("int_type", ("agent", "max_iterations"), "valid integer", "25")]),
        ({"agent": {"max_iterations": 2.0}}, [("int_type", ("agent", "max_iterations"), "valid integer", 2.0)]),
        ({"agent": {"llm_timeout_s": True}}, [("float_type", ("agent", "llm_timeout_s"), "valid number", True)]),
        ({"agent": {"llm_timeout_s": float("nan")}}, [("greater_than", ("agent", "llm_timeout_s"), "than 0", None)]),
        ({"agent": []}, [("model_type", ("agent",), "dictionary or instance of AgentLimits", [])]),
        ({"thinking": "x"}, [("literal_error", ("thinking",), "'off', 'minimal', 'low', 'medium' or 'high'", "x")]),
        ({"fallbacks": [1]}, [("string_type", ("fallbacks", 0), "valid string", 1)]),
        ({"providers": []}, [("dict_type", ("providers",), "valid dictionary", [])]),
        ({"server": {"port": 70000}}, [("less_than_equal", ("server", "port"), "less than or equal to 65535", 70000)]),
        (
            {"adapters": {"a": {"builtin": "jsonl", "stream_processes": 0}}},
            [("greater_than_equal", ("adapters", "a", "stream_processes"), "greater than or equal to 1", 0)],
        ),
        (
            {"adapters": {"a": {"builtin": "jsonl", "stream_processes": 33}}},
            [("less_than_equal", ("adapters", "a", "stream_processes"), "less than or equal to 32", 33)],
        ),
        (
            {"adapters": {"a": {"builtin": "jsonl", "stream_processes": "4"}}},
            [("int_type", ("adapters", "a", "stream_processes"), "valid integer", "4")],
        ),
        ({"providers": {"x": {"models": {"m": {"input_price": -1}}}}}, [("greater_than_equal", None, "to 0", -1)]),
        (
            {"default_model": "abc"},
            [("value_error", ("default_model",), "Value error, expected 'provider/model'", None)],
        ),
    ],
)
def test_one_problem_is_reported_as_before(data: dict[str, Any], expected: list[tuple[Any, ...]]) -> None:
    found = _problems(data)
    assert len(found) == len(expected)
    for (kind, loc, message, value), (want_kind, want_loc, want_text, want_value) in zip(found, expected, strict=True):
        assert kind == want_kind and want_text in message
        assert want_loc is None or loc == want_loc
        assert want_value is None or (value == want_value and type(value) is type(want_value))


def test_every_problem_is_reported_at_once_fields_before_unknown_keys() -> None:
    found = _problems(
        {
            "foo": 1,
            "agent": {"bar": 2, "max_retries": -1},
            "providers": {"x": {"auth_profiles": [{"name": ""}]}},
            "server": {"host": ""},
        }
    )
    assert [(kind, loc) for kind, loc, _, _ in found] == [
        ("greater_than_equal", ("agent", "max_retries")),
        ("extra_forbidden", ("agent", "bar")),
        ("string_too_short", ("providers", "x", "auth_profiles", 0, "name")),
        ("missing", ("providers", "x", "auth_profiles", 0, "api_key")),
        ("string_too_short", ("server", "host")),
        ("extra_forbidden", ("foo",)),
    ]


def test_a_union_of_scalars_names_each_type_it_tried() -> None:
    data = {"adapters": {"a": {"builtin": "jsonl", "accounts": {"m": {"config": {"k": [1]}}}}}}
    found = _problems(data)
    assert [loc[-1] for _, loc, _, _ in found] == ["str", "int", "float", "bool"]
    config = AdapterConfig.model_validate({"builtin": "jsonl", "accounts": {"m": {"config": {"i": 1, "b": True}}}})
    assert config.accounts["m"].config == {"i": 1, "b": True} and type(config.accounts["m"].config["b"]) is bool


def test_a_record_check_runs_only_when_its_fields_are_valid() -> None:
    assert _problems({"adapters": {"a": {"timeout_s": 0}}}) == [
        ("greater_than", ("adapters", "a", "timeout_s"), "Input should be greater than 0", 0)
    ]
    kind, loc, message, _ = _problems({"adapters": {"a": {}}})[0]
    assert (kind, loc) == ("value_error", ("adapters", "a")) and "give exactly one of command" in message


def test_records_are_frozen_values() -> None:
    limits = AgentLimits(max_iterations=3, llm_timeout_s=5)
    assert limits.llm_timeout_s == 5.0 and type(limits.llm_timeout_s) is float  # an integer is a number
    assert repr(limits).startswith("AgentLimits(max_iterations=3, max_retries=3, ")  # as pydantic's
    assert str(limits).startswith("max_iterations=3 max_retries=3 ")
    same = AgentLimits(max_iterations=3, llm_timeout_s=5.0)
    assert limits == same and hash(limits) == hash(same)
    assert limits.model_fields_set == {"max_iterations", "llm_timeout_s"}
    with pytest.raises(AttributeError, match="frozen"):
        limits.max_iterations = 4
    changed = limits.model_copy(update={"max_retries": 0})
    assert (changed.max_retries, changed.max_iterations, limits.max_retries) == (0, 3, 3)
    dumped = limits.model_dump(exclude={"timeout_ms"})
    assert dumped["max_iterations"] == 3 and "timeout_ms" not in dumped
    with pytest.raises(RecordError, match="max_iterations: Input should be greater than 0"):
        AgentLimits(max_iterations=0)
    with pytest.raises(TypeError):
        hash(ToolPolicy())  # holds lists, like the pydantic model it replaces


class _Cold(Record):
    port: int = 1
    hosts: dict[str, NotDefinedAnywhere] = setting(default_factory=dict)  # type: ignore[name-defined]  # noqa: F821


class _Table(Record):
    name: str = "n"
    cold: _Cold = setting(default_factory=_Cold)


def test_a_field_s_annotation_is_resolved_only_when_a_value_is_checked_against_it() -> None:
    """A table left out of the file gets its defaults without resolving its annotations (most tables are absent)."""
    assert _Table.model_validate({"name": "x"}) == _Table(name="x", cold=_Cold(port=1))
    assert _Table.model_validate({"cold": {"port": 2}}).cold.port == 2
    with pytest.raises(NameError, match="NotDefinedAnywhere"):
        _Table.model_validate({"cold": {"hosts": {"a": 1}}})


def test_loading_the_config_imports_no_pydantic(isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text('[agent]\nmax_iterations = 5\n[adapters.a]\nbuiltin = "jsonl"\n')
    code = (
        "import sys\nfrom nexus.config import load_config\n"
        "assert load_config().agent.max_iterations == 5\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "[]"
