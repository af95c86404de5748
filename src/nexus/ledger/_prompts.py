"""System prompts by hash: each distinct prompt stored once, each turn points at the one it was sent.

A long-lived agent sends the same system prompt on most turns; storing it per turn would grow
the file by its size every turn. The SHA-256 of the text is the key (``turns.system_prompt_hash``).
"""

from __future__ import annotations

import hashlib
import sqlite3

from nexus.llm import now_ms


def prompt_hash(text: str) -> str:
    """The key of ``text``: its SHA-256, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def store_prompt(conn: sqlite3.Connection, text: str) -> str:
    """Store ``text`` unless it is there already (inside the caller's transaction); returns its hash."""
    key = prompt_hash(text)
    conn.execute(
        "INSERT INTO system_prompts (hash, text, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        (key, text, now_ms()),
    )
    return key


def read_prompt(conn: sqlite3.Connection, key: str) -> str | None:
    """The prompt stored under ``key``, or None."""
    row = conn.execute("SELECT text FROM system_prompts WHERE hash = ?", (key,)).fetchone()
    return None if row is None else str(row[0])
