"""Tool schemas are measured once per schema object: every model call estimates its tools."""

from __future__ import annotations

import json

import pytest

from nexus.llm import tokens
from nexus.llm.tokens import estimate_tool_tokens, schema_chars
from nexus.llm.types import Tool


def test_a_schema_is_serialized_once_and_measured_like_json(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real_dumps = json.dumps

    def counting_dumps(value: object, **kwargs: object) -> str:
        calls.append(value)
        return real_dumps(value, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tokens.json, "dumps", counting_dumps)
    schema: dict[str, object] = {"type": "object", "properties": {"path": {"type": "string", "description": "é"}}}
    expected = len(real_dumps(schema, ensure_ascii=False))
    assert schema_chars(schema) == expected
    assert schema_chars(schema) == expected
    assert len(calls) == 1
    twin = json.loads(real_dumps(schema))  # equal content, another object: measured on its own, same size
    assert schema_chars(twin) == expected and len(calls) == 2
    assert schema_chars(schema, ensure_ascii=True) == len(real_dumps(schema)) != expected


def test_tool_token_estimates_are_unchanged_by_the_cache() -> None:
    tool = Tool("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
    chars = len("read") + len("Read a file") + len(json.dumps(tool.parameters, ensure_ascii=False))
    assert estimate_tool_tokens([tool, tool]) == -(-2 * chars // tokens.CHARS_PER_TOKEN)
