"""Text typed or piped by the user, made valid Unicode before anything stores or sends it.

Python hands undecodable bytes in ``argv`` (and in stdin under a C/POSIX locale) over as
lone surrogates (``'caf\\udce9'``), which SQLite and JSON cannot encode; under a UTF-8
locale stdin raises ``UnicodeDecodeError`` instead. Either way a message with one stray
Latin-1 byte used to end in a traceback after the session was created. The CLI reads
stdin with ``surrogateescape`` and replaces every undecodable byte with U+FFFD (the
Unicode replacement character), saying so on stderr: the message is still sent, and
the user knows it was changed.
"""

from __future__ import annotations

import math
import sys

from nexus._lazy import LazyPattern

TYPE_CHECKING = False  # not typing's: `nexus --help` does not import typing (mypy reads the name the same way)
if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO

__all__ = [
    "accept_text",
    "clean_text",
    "env_var_name",
    "lenient_stdin",
    "message_id",
    "nonempty_name",
    "printable",
    "read_all",
    "seconds",
    "utf8_name",
    "valid_utf8",
]

_SURROGATE = LazyPattern("[\ud800-\udfff]")
_CONTROL = LazyPattern("[\x00-\x1f\x7f]")
_TERMINAL_CONTROL = LazyPattern("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters but newline and tab, and the C1 ones (U+0080-U+009F, where U+009B starts a CSI)."""
MAX_MESSAGE_ID_CHARS = 200
"""As ``POST /v1/agents/{id}/messages`` takes an ``id``."""
REPLACEMENT = "\ufffd"


def _refused(problem: str) -> argparse.ArgumentTypeError:
    """argparse's error for a value its ``type`` refuses (imported here: ``nexus run`` may parse without argparse)."""
    import argparse

    return argparse.ArgumentTypeError(problem)


def utf8_name(text: str) -> str:
    """An argparse ``type`` for names from argv (session labels, agent and message ids, turn ids).

    Bytes that are not UTF-8 (lone surrogates here) are refused (exit 2). A message with such
    bytes is accepted with them replaced, but a name is typed again later or looked up in the
    ledger: changing it silently would create something nobody can address, and passing it on
    made SQLite raise ``UnicodeEncodeError``.
    """
    if not valid_utf8(text):
        raise _refused(f"{text.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8")
    return text


def new_label(text: str) -> str:
    """``--label`` of a session a command makes (fork, import): ``--label ""`` quietly meant the default label,
    while ``run -s ""`` is refused; a script passing an unset variable got a session under a name it did not
    expect."""
    utf8_name(text)
    if not text.strip():
        raise _refused("is empty; leave --label out for the default label")
    return text


def valid_utf8(text: str) -> bool:
    """Whether ``text`` holds no lone surrogate (how argv's undecodable bytes arrive): it encodes as UTF-8."""
    return not _SURROGATE.search(text)


def nonempty_name(text: str) -> str:
    """:func:`utf8_name` that may not be empty or blank (``--model ""`` was stored as "the default")."""
    utf8_name(text)
    if not text.strip():
        raise _refused("is empty; leave the option out to use the default")
    return text


def message_id(text: str) -> str:
    """``--id``: a name of at most 200 characters, no control characters (``--id ""`` made a new id silently)."""
    utf8_name(text)
    if not text.strip():
        raise _refused("is empty; leave --id out to get a new id")
    if len(text) > MAX_MESSAGE_ID_CHARS:
        limit = MAX_MESSAGE_ID_CHARS
        raise _refused(f"is {len(text):,} characters; a message id has at most {limit}")
    if _CONTROL.search(text):
        raise _refused(f"{text!r} holds control characters (a newline, a tab …)")
    return text


_VARIABLE = LazyPattern(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def env_var_name(text: str) -> str:
    """``--credential-env VAR``: a name a shell can export, as ``${VAR}`` in nexus.toml refers to one
    (``"BAD NAME"`` was stored as ``${BAD NAME}``, never expanded: the adapter got that text as its token)."""
    if not _VARIABLE.match(text):
        raise _refused(
            f"{text!r} is not an environment variable name: use letters, digits and _, not starting with a "
            "digit (e.g. TELEGRAM_BOT_TOKEN)"
        )
    return text


def seconds(text: str) -> float:
    """A positive, finite number of seconds (``--timeout -5`` and ``nan`` were taken)."""
    try:
        value = float(text)
    except ValueError:
        raise _refused(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise _refused(f"{text!r}: give a positive number of seconds")
    return value


def printable(text: str) -> str:
    """``text`` with control characters shown as escapes (``\\x1b``): a name from the ledger printed
    in a table must not move the cursor or recolour the terminal."""
    return _escaped(_CONTROL, text)


def terminal_text(text: str) -> str:
    """Stored text (a message, a checkpoint's preview) for a terminal: lines and tabs kept, every other
    control character shown as an escape. Anyone who can message an agent writes the text: raw, an
    ``ESC ]0;…`` set the operator's window title and ``ESC [2J`` cleared the screen."""
    return _escaped(_TERMINAL_CONTROL, text)


def _escaped(characters: LazyPattern, text: str) -> str:
    """``text`` with each character ``characters`` matches shown as its Python escape (``\\x1b``)."""
    return characters.sub(lambda found: repr(found.group())[1:-1], text) if characters.search(text) else text


def clean_text(text: str) -> tuple[str, int]:
    """``text`` with each lone surrogate (an undecodable byte) replaced by U+FFFD, and how many there were."""
    return _SURROGATE.subn(REPLACEMENT, text)


def accept_text(text: str, source: str, err: TextIO | None = None) -> str:
    """:func:`clean_text`, with one stderr line when something was replaced (``source``: where it came from)."""
    cleaned, count = clean_text(text)
    if count:
        stream = err if err is not None else sys.stderr
        noun = "byte that is" if count == 1 else "bytes that are"
        stream.write(
            f"nexus: the message {source} has {count} {noun} not valid UTF-8; "
            f"sent with {'it' if count == 1 else 'them'} replaced by {REPLACEMENT}\n"
        )
        stream.flush()
    return cleaned


def lenient_stdin(stream: Any) -> None:
    """Make a text stream keep undecodable bytes (as surrogates) instead of raising on them.

    Only streams that can be reconfigured (``sys.stdin``) are changed; test doubles are left alone.
    """
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and getattr(stream, "errors", "surrogateescape") != "surrogateescape":
        try:
            reconfigure(errors="surrogateescape")
        except (ValueError, OSError):  # already read from, or not a regular text stream: keep it as it is
            pass


def read_all(stream: Any, limit: int | None = None) -> str:
    """All of ``stream`` as text, undecodable bytes replaced (and reported) by :func:`accept_text`.

    With ``limit`` (characters) no more than one character past it is read: a message over it is
    refused at once (50 MB piped into ``nexus send`` took 44 s to be refused), before anything is
    said about its bytes.
    """
    from nexus.errors import UsageError

    lenient_stdin(stream)
    text = stream.read() if limit is None else stream.read(limit + 1)
    if limit is not None and len(text) > limit:
        raise UsageError(f"the message on stdin is over the limit of {limit:,} characters; send a shorter one")
    return accept_text(text, "on stdin")
