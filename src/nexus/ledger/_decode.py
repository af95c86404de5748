"""The stored form of a message body, and its fast decoding (the hot part of ``history()``).

Since schema version 3 a ``messages.body`` is a compact JSON object written only by
:func:`encode_body` (the ledger's own trusted data), so it can be rebuilt without serde's
per-field validation, with positional constructor calls:

* the role is implied by the keys: an assistant message has ``"o"``, a tool result ``"i"``,
  a user message neither (the ``role`` column holds it too);
* an assistant message's ``(api, provider, model)`` is interned in the ``origins`` table and
  stored as its small integer id ``"o"`` (it repeated ~60 bytes on every assistant message);
* ``"c"`` is the content: a plain text block without signature is a bare JSON string, a tool
  call without raw arguments or thought signature is ``[id, name, arguments]``, any other
  block is serde's block object; a user message's string content stays a string;
* ``"t"`` timestamp, ``"s"`` stop reason (absent = ``stop``), ``"u"`` usage as
  ``[input, output, cache_read, cache_write, reasoning, total]`` (a 7th element ``1`` when the
  counts are estimated) and ``"k"`` cost as
  ``[input, output, cache_read, cache_write, total]`` (absent = zero), ``"i"``/``"n"`` tool call
  id and name, ``"e"`` is_error, ``"d"`` details; the rare error fields keep serde's names.

Bodies of schema version 2 (full ``nexus.llm.serde`` JSON with a ``"role"`` key) are still read.
Anything unexpected falls back to ``serde.message_from_dict``, which raises a precise
``MessageFormatError``. Tests check that encode/decode round-trips every field.
"""

from __future__ import annotations

import gc
import json
import sqlite3
from typing import Any

from nexus.ledger._rows import dumps
from nexus.llm import (
    AssistantContent,
    AssistantMessage,
    ContentBlock,
    Cost,
    ImageContent,
    Message,
    MessageFormatError,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
    block_to_dict,
    message_from_dict,
)

_COST_KEYS = ("input", "output", "cache_read", "cache_write", "total")
_ERROR_FIELDS = ("error_message", "error_kind", "retry_after", "response_id")

Origins = dict[int, tuple[str, str, str]]
"""``origins`` table: id -> (api, provider, model)."""


# --------------------------------------------------------------------------- encode


def _block_out(b: ContentBlock) -> Any:
    kind = type(b)
    if kind is TextContent and b.signature is None:  # type: ignore[union-attr]
        return b.text  # type: ignore[union-attr]
    if kind is ToolCall and b.raw_arguments is None and b.thought_signature is None:  # type: ignore[union-attr]
        return [b.id, b.name, b.arguments]  # type: ignore[union-attr]
    return block_to_dict(b)


def _blocks_out(blocks: list[Any]) -> list[Any]:
    return [_block_out(b) for b in blocks]


def origin_id(conn: sqlite3.Connection, api: str, provider: str, model: str) -> int:
    """The ``origins`` id of ``(api, provider, model)``, inserting it if new (inside the caller's transaction)."""
    row = conn.execute(
        "SELECT id FROM origins WHERE api = ? AND provider = ? AND model = ?", (api, provider, model)
    ).fetchone()
    if row is not None:
        return int(row[0])
    # Two writers may add the same origin at once (PostgreSQL, READ COMMITTED): the second finds it there.
    sql = "INSERT INTO origins (api, provider, model) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING id"
    row = conn.execute(sql, (api, provider, model)).fetchone()
    if row is None:
        row = conn.execute(
            "SELECT id FROM origins WHERE api = ? AND provider = ? AND model = ?", (api, provider, model)
        ).fetchone()
    return int(row[0])


_KNOWN_ORIGINS = 64
"""Origins a turn store remembers as committed (an agent has one or a few models)."""

Origin = tuple[str, str, str]


class OriginIds:
    """``origins`` ids a turn store saw committed, shared by its writes (see :class:`OriginWrite`).

    Every assistant message stores its ``(api, provider, model)`` as an id; an agent writes the same triple
    turn after turn, which cost a ``SELECT`` per turn. Origins rows are never deleted or renumbered (a copy
    keeps their ids), so an id seen committed stays right for the life of the store.
    """

    __slots__ = ("known",)

    def __init__(self) -> None:
        self.known: dict[Origin, int] = {}

    def write(self) -> OriginWrite:
        """The ids of one write: what it finds stays its own until it commits."""
        return OriginWrite(self.known)


class OriginWrite:
    """One turn write's view of :class:`OriginIds`: committed ids, plus those its own transaction found.

    Found ids join the shared ones only after the commit (:meth:`committed`): a concurrent write must not
    use an id another transaction inserted and may still roll back, and a retried attempt forgets what the
    rolled-back one found (:meth:`attempt`).
    """

    __slots__ = ("_fresh", "_known")

    def __init__(self, known: dict[Origin, int]) -> None:
        self._known = known
        self._fresh: dict[Origin, int] = {}

    def attempt(self) -> OriginWrite:
        """Start a transaction attempt of this write."""
        self._fresh.clear()
        return self

    def get(self, conn: sqlite3.Connection, origin: Origin) -> int:
        """The id of ``origin``, from memory or looked up (inserted if new) in the caller's transaction."""
        found = self._known.get(origin)
        if found is None:
            found = self._fresh.get(origin)
            if found is None:
                found = self._fresh[origin] = origin_id(conn, *origin)
        return found

    def committed(self) -> None:
        """The write committed: what it found is known to the store's later writes (bounded)."""
        if self._fresh:
            if len(self._known) + len(self._fresh) > _KNOWN_ORIGINS:
                self._known.clear()
            self._known.update(self._fresh)


def encode_body(message: Message, origin: int) -> str:
    """The stored JSON of ``message`` (``origin``: its origins id; ignored unless assistant)."""
    if type(message) is AssistantMessage:
        out: dict[str, Any] = {"c": _blocks_out(message.content), "o": origin}
        if message.stop_reason != "stop":
            out["s"] = message.stop_reason
        u = message.usage
        counts = [u.input, u.output, u.cache_read, u.cache_write, u.reasoning, u.total]
        if u.estimated:
            counts.append(1)  # a 7th element: older readers ignore it, so no schema change
        if any(counts):
            out["u"] = counts
        c = u.cost
        cost = [c.input, c.output, c.cache_read, c.cache_write, c.total]
        if any(cost):
            out["k"] = cost
        for name in _ERROR_FIELDS:
            value = getattr(message, name)
            if value is not None:
                out[name] = value
        out["t"] = message.timestamp
        return dumps(out)
    if type(message) is ToolResultMessage:
        out = {"i": message.tool_call_id, "n": message.tool_name, "c": _blocks_out(message.content)}
        if message.is_error:
            out["e"] = 1
        if message.details is not None:
            out["d"] = message.details
        out["t"] = message.timestamp
        return dumps(out)
    if type(message) is UserMessage:
        content = message.content
        return dumps({"c": content if isinstance(content, str) else _blocks_out(content), "t": message.timestamp})
    raise TypeError(f"cannot store {type(message).__name__}; expected a user, assistant or tool-result message")


# --------------------------------------------------------------------------- decode


def _block(b: dict[str, Any]) -> ContentBlock:
    kind = b["type"]
    if kind == "text":
        return TextContent(b["text"], b.get("signature"))
    if kind == "tool_call":
        args = b["arguments"]
        if type(args) is not dict:
            raise KeyError("arguments")
        return ToolCall(b["id"], b["name"], args, b.get("raw_arguments"), b.get("thought_signature"))
    if kind == "thinking":
        return ThinkingContent(b["thinking"], b.get("signature"), bool(b.get("redacted", False)))
    if kind == "image":
        return ImageContent(b["data"], b["mime_type"])
    raise KeyError(kind)


def _user_blocks(items: list[Any]) -> list[UserContent]:
    out: list[UserContent] = []
    for b in items:
        if type(b) is str:
            out.append(TextContent(b))
            continue
        block = _block(b)
        if type(block) is not TextContent and type(block) is not ImageContent:
            raise KeyError(block.type)
        out.append(block)
    return out


def _decode_all(parsed: list[Any], origins: Origins) -> list[Message]:
    """Build the messages of parsed bodies: one flat loop with local names (this is the hot loop of history)."""
    text, call, cost_t, usage_t = TextContent, ToolCall, Cost, Usage
    out: list[Message] = []
    append = out.append
    for d in parsed:
        if "o" in d:
            api, provider, model = origins[d["o"]]
            blocks: list[AssistantContent] = []
            for b in d["c"]:
                kind = type(b)
                if kind is str:
                    blocks.append(text(b))
                elif kind is list:
                    if type(b[2]) is not dict:
                        raise KeyError("arguments")
                    blocks.append(call(b[0], b[1], b[2]))
                else:
                    block = _block(b)
                    if isinstance(block, ImageContent):
                        raise KeyError("image")
                    blocks.append(block)
            k = d.get("k")
            cost = cost_t(*k) if k else cost_t()
            u = d.get("u")
            usage = usage_t(u[0], u[1], u[2], u[3], u[4], u[5], cost, len(u) > 6) if u else usage_t(cost=cost)
            g = d.get
            append(
                AssistantMessage(
                    blocks,
                    api,
                    provider,
                    model,
                    usage,
                    g("s", "stop"),
                    g("error_message"),
                    g("error_kind"),
                    g("retry_after"),
                    g("response_id"),
                    d["t"],
                )
            )
        elif "i" in d:
            append(ToolResultMessage(d["i"], d["n"], _user_blocks(d["c"]), "e" in d, d.get("d"), d["t"]))
        elif "role" in d:
            append(message_from_dict(d))  # a schema-2 body (serde JSON)
        else:
            content = d["c"]
            append(UserMessage(content if type(content) is str else _user_blocks(content), d["t"]))
    return out


def decode_one(data: Any, origins: Origins) -> Message:
    """Decode one parsed body (fast path; anything malformed raises serde's ``MessageFormatError``)."""
    try:
        return _decode_all([data], origins)[0]
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        if isinstance(data, dict) and "role" not in data:
            text = json.dumps(data)[:120]
            raise MessageFormatError(
                f"stored message body {text} is malformed ({type(exc).__name__}: {exc}); the ledger file was "
                "changed outside Nexus or is damaged: check it with PRAGMA integrity_check"
            ) from exc
        return message_from_dict(data)  # a schema-2 body: serde names what is wrong


def decode_body(body: str, origins: Origins) -> Message:
    """Decode one stored body."""
    return decode_one(json.loads(body), origins)


def decode_bodies(bodies: list[str], origins: Origins | None = None) -> list[Message]:
    """Decode stored message bodies, in order.

    One ``json.loads`` over the whole list (one C call instead of one per message). The
    cyclic garbage collector is paused meanwhile: decoding a long history allocates hundreds
    of thousands of small acyclic objects, and the collections they trigger (each scanning
    the growing heap) doubled the time of a 40,000-message history.
    """
    if not bodies:
        return []
    o = origins if origins is not None else {}  # an empty SeenOrigins loads what it lacks
    with gc_paused():
        parsed = json.loads("[" + ",".join(bodies) + "]")
        try:
            return _decode_all(parsed, o)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            return [decode_one(d, o) for d in parsed]


def load_origins(conn: sqlite3.Connection) -> Origins:
    """The whole ``origins`` table (a handful of rows: one per api/provider/model ever used)."""
    return {
        int(i): (str(a), str(p), str(m)) for i, a, p, m in conn.execute("SELECT id, api, provider, model FROM origins")
    }


class SeenOrigins(dict[int, Origin]):
    """The ``origins`` rows a reader loaded, kept between its reads: an id it has not seen loads the table
    again, in the read transaction at hand (:meth:`using`). Rows are never deleted or renumbered, and a
    read sees only committed ones, so a row once seen stays right. The window cache decodes every turn's
    new rows with it instead of reading the whole table each turn."""

    __slots__ = ("conn",)

    def __init__(self) -> None:
        super().__init__()
        self.conn: Any = None

    def using(self, conn: Any) -> SeenOrigins:
        """These origins, loading what is missing through ``conn`` (a connection in a read transaction)."""
        self.conn = conn
        return self

    def __missing__(self, key: int) -> Origin:
        if self.conn is not None:
            self.update(load_origins(self.conn))
        if not dict.__contains__(self, key):
            raise KeyError(key)
        return dict.__getitem__(self, key)


def gc_paused() -> _GcPaused:
    """Pause the cyclic GC for a burst of acyclic allocations (restores the previous state): ``with gc_paused():``."""
    return _GcPaused()


class _GcPaused:
    """:func:`gc_paused`'s context manager. A class, not a ``contextlib.contextmanager``: it runs on every history
    read (1-2 a broker turn), and the generator version built a generator and a wrapper and ended in a
    StopIteration each time (~3 us a use)."""

    __slots__ = ("_enabled",)

    def __enter__(self) -> None:
        self._enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._enabled:
            gc.enable()
