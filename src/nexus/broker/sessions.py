"""Per-sender sessions: how a session key (``dm:telegram:42``) becomes a ledger session label.

An agent talks in its own session (``agent:<id>`` unless configured otherwise) and, besides,
in one session per conversation it serves — one per chat sender or group an adapter routes to
it. A message names its conversation with a *session key* (:attr:`AgentMessage.session`);
the broker keeps one queue per key and runs one turn at a time per key.

Ledger labels must be stable (the same key always lands in the same history) and safe (no
path separators, no control characters, bounded length), so a key is mapped, not used as is:

- a plain key (letters, digits and ``._@+=-:``, at most 120 characters) of an agent whose id is
  plain (letters, digits, ``._-``, at most 64) maps readably: ``:`` becomes ``~`` and the agent
  id leads — ``support`` + ``dm:telegram:42`` → ``support~dm~telegram~42``;
- anything else keeps a readable prefix and ends in ``!`` and 16 hex digits of the SHA-256 of
  agent and key (``!`` never occurs in a plain label, so the two forms cannot collide).

The original key is stored with the session (``sessions.routing_key``) and in every queued
message, so ``nexus queue list`` and ``nexus sessions`` can show where a conversation came from.
"""

from __future__ import annotations

import hashlib
import re

from nexus.broker.types import BrokerError

MAX_KEY_CHARS = 512
_PLAIN_AGENT = re.compile(r"[A-Za-z0-9._-]{1,64}")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9._@+=:-]{1,120}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._@+=~-]+")


def check_session_key(key: str) -> None:
    """Refuse a key that cannot name a conversation (empty, too long, control characters)."""
    if not key.strip():
        raise BrokerError("a session key is empty; omit it to use the agent's own session")
    if len(key) > MAX_KEY_CHARS:
        raise BrokerError(f"a session key is {len(key)} characters; the limit is {MAX_KEY_CHARS}")
    if any(ord(char) < 32 or ord(char) == 127 for char in key):
        raise BrokerError(f"session key {key!r} holds control characters")


def session_label_for(agent_id: str, own_label: str, key: str | None) -> str:
    """The ledger label of ``agent_id``'s session for ``key`` (its own session for ``None``)."""
    if key is None or key == own_label:
        return own_label
    check_session_key(key)
    if _PLAIN_AGENT.fullmatch(agent_id) and _PLAIN_KEY.fullmatch(key):
        return f"{agent_id}~{key.replace(':', '~')}"
    digest = hashlib.sha256(f"{agent_id}\n{key}".encode()).hexdigest()[:16]
    agent = _UNSAFE.sub("_", agent_id)[:32] or "agent"
    readable = _UNSAFE.sub("_", key.replace(":", "~"))[:48]
    return f"{agent}~{readable}!{digest}"
