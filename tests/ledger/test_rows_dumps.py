"""The ledger's compact JSON: the C encoder made once writes what ``json.dumps`` writes, and refuses as it does."""

from __future__ import annotations

import json

import pytest

from nexus.ledger._rows import dumps


@pytest.mark.parametrize(
    "value",
    [
        {"id": "m1", "from": "user", "to": "a1", "content": 'tâche "n°1"\n', "timestamp": 1, "metadata": {}},
        ["x", 1.5, None, True, False, -3, {"nested": [1, {"k": "v"}]}],
        "plain text",
        42,
        None,
        {1: "an int key", "n": float("inf")},
    ],
)
def test_dumps_writes_what_json_dumps_writes(value: object) -> None:
    assert dumps(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_dumps_refuses_what_json_dumps_refuses() -> None:
    circular: list[object] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(circular)
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"x": object()})
