"""Cutting credentials out of text before it is stored, shown or sent anywhere.

A provider's error text can quote the key it refused ("Incorrect API key provided: sk-…"),
and that text travels far: the HTTP answer, the live events, the ledger, the history and
exports, a chat message to a Telegram user. So every error text leaves the provider layer
through :func:`redact`, and captures (:mod:`nexus.llm.capture`) go through the same
:func:`scrub`. Two nets:

- **values**: every secret this process knows — environment variables named like a
  credential (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``), the values handed to
  :func:`add_secrets` by whoever resolves a credential (auth-profile keys, the server's
  tokens, adapter credentials), and the request's own key — replaced wherever they appear,
  also as raw JSON or a URL spell them (``a\\/b``, ``a%2Fb``, ``a+b``);
- **shapes**: strings that look like a key even when nobody told us about them
  (``sk-…``, ``sk-ant-…``, ``AIza…``, ``gh*_…``, ``xox*-…``, ``Bearer …``, a Telegram bot
  token, ``?key=…`` or ``user:password@`` in a URL, ``api_key: …``).

Values shorter than 8 characters are not searched for: they would cut ordinary words.
Redact a text whole, before it is cut to a length: a cut through a key leaves a part of it
that neither net recognises.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping

from nexus._lazy import LazyPattern

REDACTED = "[redacted]"
"""What a cut-out secret reads as."""

MIN_SECRET = 8
"""Shorter values are not treated as secrets (they would match ordinary text)."""

_SECRET_NAME = LazyPattern(r"auth|key|token|secret|passw|cookie|credential|signature|session", re.IGNORECASE)
_SECRET_ENV = LazyPattern(r"(?:API_?KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_TOKEN = r"[A-Za-z0-9._~+/=\-]"
# a generic token must hold a digit, so "Bearer authentication" or "api key: missing" stay readable
_GENERIC = rf"(?={_TOKEN}*\d){_TOKEN}{{{MIN_SECRET},}}"
_SHAPES = (
    r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-]{15,}",  # OpenAI sk-…/sk-proj-…, Anthropic sk-ant-…, DeepSeek
    r"\b(?:gsk|xai|pplx|hf|r8|glpat|npm|pypi)[_\-][A-Za-z0-9_\-]{16,}",  # Groq, xAI, Perplexity, HF, …
    r"\bAIza[0-9A-Za-z_\-]{30,}",  # Google API keys
    r"\b(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}",  # GitHub tokens
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"\b\d{6,12}:[A-Za-z0-9_\-]{30,}",  # Telegram bot tokens (also inside /bot<token>/ URLs)
    r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",  # JWTs
)
# the name stays, the value goes: "Bearer [redacted]", "?key=[redacted]", "x-api-key: [redacted]"
_LABELLED = (
    rf"((?i:\b(?:bearer|basic)\s+)){_GENERIC}",
    rf"((?i:[?&](?:key|api[_-]?key|access[_-]?token|token|secret|password)=))[^&\s\"'<>]{{{MIN_SECRET},}}",
    rf"((?i:\b(?:x-api-key|api[_-]?key|authorization|access[_-]?token|secret|password)[\"']?\s*[:=]\s*[\"']?)){_GENERIC}",
    r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)[^/\s@]+(?=@)",  # a URL's password: scheme://user:[redacted]@host
)

_registered: frozenset[str] = frozenset()  # replaced whole, never mutated: readers need no lock
_compiled: list[tuple[re.Pattern[str], str]] = []


def add_secrets(values: Iterable[str | None]) -> None:
    """Remember credentials this process resolved, so that no error text ever repeats them.

    Called by whoever turns configuration into a credential: the engine for auth-profile
    keys, ``nexus serve`` for its tokens, the adapter manager for adapter credentials.
    """
    global _registered
    found = {value for value in values if value and len(value) >= MIN_SECRET}
    if not found <= _registered:
        _registered = _registered | found


def environment_secrets(env: Mapping[str, str] | None = None) -> set[str]:
    """Values of environment variables named like credentials (``OPENAI_API_KEY``, ``GH_TOKEN`` …)."""
    source = os.environ if env is None else env
    return {value for name, value in source.items() if _SECRET_ENV.search(name) and len(value) >= MIN_SECRET}


def known_secrets(extra: Iterable[str | None] = ()) -> set[str]:
    """Every secret value this process knows: the environment's, the registered ones, and ``extra``."""
    found = environment_secrets() | _registered
    found.update(value for value in extra if value and len(value) >= MIN_SECRET)
    return found


def secret_name(name: str) -> bool:
    """Does a header, parameter or field of this name carry a credential?"""
    return bool(_SECRET_NAME.search(name))


def scrub(data: bytes, secrets: Iterable[str]) -> bytes:
    """``data`` with every occurrence of a secret value (long enough to be one) replaced by ``[redacted]``."""
    for secret in sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True):
        data = data.replace(secret.encode("utf-8"), REDACTED.encode())
    return data


def redact(text: str, extra: Iterable[str | None] = ()) -> str:
    """``text`` without any known secret value (plus ``extra``) and without anything shaped like a key."""
    for secret in sorted(known_secrets(extra), key=len, reverse=True):
        for spelling in _spellings(secret):
            if spelling in text:
                text = text.replace(spelling, REDACTED)
    for pattern, replacement in _patterns():
        text = pattern.sub(replacement, text)
    return text


def _spellings(secret: str) -> list[str]:
    """``secret`` as written, and as raw JSON and URLs write it (a provider may echo any of them)."""
    from urllib.parse import quote, quote_plus  # here: urllib.parse brings ipaddress, 5 M instructions an import

    escaped = json.dumps(secret)[1:-1]
    found = [secret, escaped, escaped.replace("/", "\\/"), quote(secret, safe=""), quote(secret), quote_plus(secret)]
    return list(dict.fromkeys(found))


def key_shaped(text: str) -> bool:
    """Does ``text`` hold something shaped like a key (whatever its name)?"""
    return any(pattern.search(text) for pattern, _ in _patterns())


def _patterns() -> list[tuple[re.Pattern[str], str]]:
    """The key shapes, compiled on first use (importing this module costs nothing)."""
    if not _compiled:
        found = [(re.compile("|".join(_SHAPES)), REDACTED)]
        found += [(re.compile(labelled), rf"\g<1>{REDACTED}") for labelled in _LABELLED]
        _compiled[:] = found
    return _compiled


__all__ = [
    "REDACTED",
    "add_secrets",
    "environment_secrets",
    "key_shaped",
    "known_secrets",
    "redact",
    "scrub",
    "secret_name",
]
