"""Library error messages → CLI wording, at the boundary where they are printed.

Library errors give library advice ("list sessions with ``Ledger.list_sessions()``", "pass
``api_key`` in ``StreamOptions``"); a user of the ``nexus`` command needs the command or
the ``nexus.toml`` setting instead. The library keeps its messages; this module rephrases
them only where the CLI prints them.
"""

from __future__ import annotations

import re

__all__ = ["cli_message", "cli_text"]

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
        return (
            f"no session or alias named {exc.label!r}: list them with `nexus sessions list`, "
            f'or start it with `nexus run -s {exc.label} "message"`'
        )
    return cli_text(str(exc))
