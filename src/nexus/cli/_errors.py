"""Library error messages → CLI wording, at the boundary where they are printed.

Library errors give library advice ("list sessions with ``ledger.sessions.list()``", "pass
``api_key`` in ``StreamOptions``"); a user of the ``nexus`` command needs the command or
the ``nexus.toml`` setting instead. The library keeps its messages; this module rephrases
them only where the CLI prints them.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.ledger import Ledger

__all__ = ["cli_message", "cli_text", "recovered_notice"]


async def recovered_notice(ledger: Ledger, ids: list[str]) -> str:
    """``nexus: closed 2 turns left open by a stopped process (1 aborted, 1 completed)``: each with its true status.

    A turn whose owner saved its outcome to a rescue file (the database was full or held by
    another process at its final write) is closed with that outcome, often ``completed``;
    calling every recovered turn "aborted" was untrue.
    """
    from nexus.ledger import LedgerError

    statuses: Counter[str] = Counter()
    for turn_id in ids:
        try:
            statuses[(await ledger.turns.get(turn_id)).status] += 1
        except LedgerError:
            statuses["closed"] += 1
    noun = "turn" if len(ids) == 1 else "turns"
    detail = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
    if len(ids) == 1:
        detail = f"as {next(iter(statuses))}"
    return f"nexus: closed {len(ids)} {noun} left open by a stopped process ({detail})"


_KEY_ADVICE = re.compile(r"no API key for provider '([^']+)': set (.+?) or pass api_key in StreamOptions")
_BASE_URL_ADVICE = re.compile(
    r"no base URL for provider '([^']+)': set (\S+), give the model a base_url or pass base_url in StreamOptions"
)


def cli_text(text: str) -> str:
    """Replace Python-API advice inside a library message with the CLI/config equivalent."""
    text = _KEY_ADVICE.sub(
        lambda m: (
            f"no API key for provider '{m[1]}': export {m[2]}=…, "
            f'or put the key in nexus.toml: [providers.{m[1]}] api_key = "…"'
        ),
        text,
    )
    return _BASE_URL_ADVICE.sub(
        lambda m: (
            f"no base URL for provider '{m[1]}': export {m[2]}, or set base_url in the "
            f"[providers.{m[1]}] table of nexus.toml"
        ),
        text,
    )


def cli_message(exc: BaseException) -> str:
    """What the CLI prints for ``exc``: library advice rewritten for a command-line user."""
    from nexus.ledger import SessionNotFound

    if isinstance(exc, SessionNotFound):
        said = f"no session or alias named {exc.label!r}: list them with `nexus sessions list`"
        if not exc.label.isprintable():  # `run -s` refuses such a label; printed raw, the hint recoloured the terminal
            return said
        import shlex

        return f'{said}, or start it with `nexus run -s {shlex.quote(exc.label)} "message"`'  # a command that works
    return cli_text(str(exc))
