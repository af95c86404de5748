"""A queue row's message text: a broker message's usual wire form is written out directly, the same text the
ledger's JSON encoder writes, and anything else goes through that encoder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nexus.broker import AgentMessage
from nexus.ledger import AcceptRequest, Ledger, NewSession
from nexus.ledger import _queue_rows as rows
from nexus.ledger._rows import dumps
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore


class _Text(str):
    pass


def _wire(**changes: object) -> dict[str, object]:
    message = AgentMessage(id="m1", from_="user", to="a1", content="task 1", timestamp=1764460000000).to_json()
    message.update(changes)
    return message


@pytest.mark.parametrize(
    "message",
    [
        _wire(),
        _wire(id='m"\\\n\u2028é😀\x00', content="</script>\t tâche", conversation_id="c1", timestamp=-5),
        _wire(metadata={"hop": 2, "reply_to": "boss", "deliver_to": {"to": ["1", 2.5, None, True]}, "é": "ü"}),
        _wire(timestamp=True),  # a bool is not the time: written by the encoder (true)
        _wire(timestamp=1.5),
        _wire(id=_Text("m1")),
        _wire(conversation_id=7),
        _wire(session="dm:telegram:42"),  # a session key: another shape
        {"content": "keys in another order", "id": "m1"},
        "plain text",
        ["a", 1],
        None,
    ],
)
def test_a_message_is_written_as_the_encoder_writes_it(message: object) -> None:
    expected = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    assert rows.message_json(message) == dumps(message) == expected


def test_a_message_refused_by_the_encoder_is_refused_the_same() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        rows.message_json(_wire(metadata={"x": object()}))


def test_a_plain_message_is_accepted_without_the_generic_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The usual send's row (``AgentMessage.to_json``, no metadata) is written without the generic encoder, which
    took ~2 us of every message; the stored text reads back as the message."""
    encoded: list[object] = []

    def counted(value: object) -> str:
        encoded.append(value)
        return dumps(value)

    monkeypatch.setattr(rows, "dumps", counted)
    with Ledger.open(tmp_path / "agents.db") as ledger:
        run_inline(ledger.sessions.ensure(NewSession("agent:a1")))
        store = BrokerStore(ledger.database)
        message = _wire(content='tâche "1"\n')
        [(item, created)] = store.accept_many([AcceptRequest("a1", "agent:a1", "m1", "user", message, "followup")])
        assert created and encoded == []
        stored = ledger.database.read(
            lambda conn: conn.execute("SELECT message_json FROM queue_items WHERE id = ?", (item.id,)).fetchone()[0]
        )
    assert stored == json.dumps(message, separators=(",", ":"), ensure_ascii=False) and json.loads(stored) == message
