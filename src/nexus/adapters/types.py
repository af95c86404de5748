"""The adapter protocol's data: delivery targets and results, ``info``, ``health`` and stream status lines.

These are the JSON shapes an adapter executable reads and writes (reference/nexus-specs.md §4,
``docs/adapters.md``). They are plain slotted dataclasses with explicit ``to_json`` /
``from_json`` so the wire names stay exactly the protocol's (snake_case for delivery data,
camelCase for the seed-004 stream status lines) whatever Python calls them. Parsing is
defensive: adapters are foreign programs, so a wrong shape raises :class:`ProtocolError`
with the reason, and callers log and skip it instead of crashing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from nexus.errors import NexusError

CAPABILITIES: tuple[str, ...] = (
    "monitor",
    "send",
    "stream",
    "backfill",
    "health",
    "react",
    "edit",
    "delete",
    "poll",
    "accounts",
)
"""The capability flags an adapter may list in ``info.supports``."""

ErrorType: TypeAlias = Literal[
    "rate_limited", "permission_denied", "not_found", "content_rejected", "network", "unknown"
]
ERROR_TYPES: tuple[str, ...] = (
    "rate_limited",
    "permission_denied",
    "not_found",
    "content_rejected",
    "network",
    "unknown",
)


class ProtocolError(NexusError):
    """An adapter wrote something that is not the protocol (the message says what was wrong)."""


def _str(data: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise ProtocolError(f"missing {key!r}")
        return None
    if not isinstance(value, str):
        raise ProtocolError(f"{key!r} must be a string, got {type(value).__name__}")
    return value


MESSAGE_ID_LIMIT = 512
"""The most characters a platform message id an adapter reports may have (``message_ids``, ``messageId``)."""


def _message_ids(ids: object, key: str) -> list[str]:
    """``ids`` as strings: a list of strings (or integers), each 1 to :data:`MESSAGE_ID_LIMIT` characters."""
    if not isinstance(ids, list) or not all(isinstance(i, str | int) and not isinstance(i, bool) for i in ids):
        raise ProtocolError(f"{key!r} must be a list of strings")
    return [_message_id(i, key) for i in ids]


def _message_id(value: str | int, key: str) -> str:
    text = str(value)
    if not 0 < len(text) <= MESSAGE_ID_LIMIT:
        raise ProtocolError(
            f"{key!r} holds an id of {len(text)} characters; a message id is 1 to {MESSAGE_ID_LIMIT} characters"
        )
    return text


def _obj(data: object, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ProtocolError(f"{what} must be a JSON object, got {type(data).__name__}")
    return data


@dataclass(slots=True, frozen=True)
class DeliveryTarget:
    """Where a reply goes: ``{channel, account_id, to, thread_id?, reply_to_id?}``.

    ``channel`` is the adapter name in config (the platform's instance); ``to`` is the
    platform's address (``chat:<id>`` for Telegram, ``channel:<id>`` for Discord, a phone
    number...). Only the first message of a delivery replies to ``reply_to_id``; ``thread_id``
    applies to all of them.
    """

    channel: str
    account_id: str
    to: str
    thread_id: str | None = None
    reply_to_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The wire form (optional fields omitted when unset)."""
        out: dict[str, Any] = {"channel": self.channel, "account_id": self.account_id, "to": self.to}
        if self.thread_id is not None:
            out["thread_id"] = self.thread_id
        if self.reply_to_id is not None:
            out["reply_to_id"] = self.reply_to_id
        return out

    @classmethod
    def from_json(cls, data: object) -> DeliveryTarget:
        """Parse the wire form (``platform`` is accepted for ``channel``, as in the spec's v2 naming)."""
        obj = _obj(data, "target")
        channel = _str(obj, "channel", required=False) or _str(obj, "platform", required=False) or ""
        return cls(
            channel=channel,
            account_id=_str(obj, "account_id", required=False) or "",
            to=_str(obj, "to") or "",
            thread_id=_str(obj, "thread_id", required=False),
            reply_to_id=_str(obj, "reply_to_id", required=False),
        )

    @property
    def key(self) -> str:
        """``channel/account:to[#thread]``: one line naming the target in logs and reports."""
        thread = f"#{self.thread_id}" if self.thread_id else ""
        return f"{self.channel}/{self.account_id}:{self.to}{thread}"


@dataclass(slots=True, frozen=True)
class DeliveryError:
    """Why a ``send`` failed; ``retry`` says whether trying again may help, after ``retry_after_ms``."""

    type: str
    message: str
    retry: bool = False
    retry_after_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "message": self.message, "retry": self.retry}
        if self.retry_after_ms is not None:
            out["retry_after_ms"] = self.retry_after_ms
        return out


@dataclass(slots=True)
class DeliveryResult:
    """What ``send`` prints: ``{success, message_ids[], chunks_sent, total_chars?, error?}``."""

    success: bool
    message_ids: list[str] = field(default_factory=list)
    chunks_sent: int = 0
    total_chars: int | None = None
    error: DeliveryError | None = None
    attempts: int = 1
    """How many times ``send`` ran to get this result (retries included); not part of the wire form."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "success": self.success,
            "message_ids": list(self.message_ids),
            "chunks_sent": self.chunks_sent,
        }
        if self.total_chars is not None:
            out["total_chars"] = self.total_chars
        if self.error is not None:
            out["error"] = self.error.to_json()
        return out

    @classmethod
    def from_json(cls, data: object) -> DeliveryResult:
        obj = _obj(data, "DeliveryResult")
        success = obj.get("success")
        if not isinstance(success, bool):
            raise ProtocolError("'success' must be true or false")
        ids = _message_ids(obj.get("message_ids", []), "message_ids")
        chunks = obj.get("chunks_sent", len(ids))
        if not isinstance(chunks, int) or isinstance(chunks, bool):
            raise ProtocolError("'chunks_sent' must be an integer")
        total = obj.get("total_chars")
        if total is not None and (not isinstance(total, int) or isinstance(total, bool)):
            raise ProtocolError("'total_chars' must be an integer")
        error = _delivery_error(obj.get("error"))
        if not success and error is None:
            error = DeliveryError("unknown", "the adapter reported failure without an error")
        return cls(success, ids, chunks, total, error)


def said(text: object) -> str:
    """Error text an adapter wrote, without any credential: an adapter may quote its own token.

    Like a provider's error text (:func:`nexus.llm.redact.redact`), before it is stored, shown or sent.
    """
    from nexus.llm import redact  # only when an adapter reports an error

    return redact(str(text))


def _delivery_error(raw: object) -> DeliveryError | None:
    if raw is None:
        return None
    obj = _obj(raw, "error")
    kind = obj.get("type", "unknown")
    if kind not in ERROR_TYPES:
        kind = "unknown"
    message = obj.get("message", "")
    retry_after = obj.get("retry_after_ms")
    if retry_after is not None and (not isinstance(retry_after, int | float) or isinstance(retry_after, bool)):
        raise ProtocolError("'error.retry_after_ms' must be a number")
    return DeliveryError(
        type=str(kind),
        message=said(message),
        retry=bool(obj.get("retry", False)),
        retry_after_ms=None if retry_after is None else max(0, int(retry_after)),
    )


@dataclass(slots=True, frozen=True)
class AdapterInfo:
    """What ``info`` prints: the adapter's platform, version, capability flags and text limit."""

    platform: str
    name: str
    version: str
    supports: tuple[str, ...]
    multi_account: bool = False
    text_limit: int | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)

    def can(self, capability: str) -> bool:
        """Whether ``capability`` (``send``, ``stream``, ``monitor``, ``health``...) is listed."""
        return capability in self.supports

    def to_json(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "name": self.name,
            "version": self.version,
            "supports": list(self.supports),
            "multi_account": self.multi_account,
            "platform_capabilities": dict(self.capabilities),
        }

    @classmethod
    def from_json(cls, data: object) -> AdapterInfo:
        obj = _obj(data, "info")
        platform = _str(obj, "platform", required=False) or _str(obj, "channel", required=False)
        if not platform:
            raise ProtocolError("info needs 'platform' (or 'channel')")
        supports = obj.get("supports")
        if not isinstance(supports, list) or not all(isinstance(s, str) for s in supports):
            raise ProtocolError("info 'supports' must be a list of capability names")
        unknown = sorted(set(supports) - set(CAPABILITIES))
        if unknown:
            raise ProtocolError(f"info lists unknown capabilities {unknown}; known: {', '.join(CAPABILITIES)}")
        caps_raw = obj.get("platform_capabilities", obj.get("channel_capabilities", {}))
        caps = _obj(caps_raw, "platform_capabilities")
        limit = caps.get("text_limit")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0):
            raise ProtocolError("'text_limit' must be a positive integer")
        return cls(
            platform=platform,
            name=_str(obj, "name", required=False) or platform,
            version=_str(obj, "version", required=False) or "0",
            supports=tuple(supports),
            multi_account=bool(obj.get("multi_account", False)),
            text_limit=limit,
            capabilities=caps,
        )


@dataclass(slots=True, frozen=True)
class HealthReport:
    """What ``health`` prints: ``{connected, account, last_event_at?, error?}``."""

    connected: bool
    account: str
    last_event_at: str | None = None
    error: str | None = None

    @classmethod
    def from_json(cls, data: object) -> HealthReport:
        obj = _obj(data, "health")
        connected = obj.get("connected")
        if not isinstance(connected, bool):
            raise ProtocolError("health 'connected' must be true or false")
        last = obj.get("last_event_at")
        return cls(
            connected=connected,
            account=str(obj.get("account", "")),
            last_event_at=None if last is None else str(last),
            error=None if obj.get("error") is None else said(obj.get("error")),
        )


StatusType: TypeAlias = Literal[
    "message_created", "message_updated", "message_sent", "delivery_complete", "delivery_error"
]


@dataclass(slots=True, frozen=True)
class AdapterStreamStatus:
    """One status line of a ``stream`` process (seed 004), camelCase on the wire.

    ``message_created{messageId}``, ``message_updated{messageId, chars}``,
    ``message_sent{messageId, final}``, ``delivery_complete{messageIds}``,
    ``delivery_error{error}``. One class with the union of the fields keeps the hot reader
    loop simple; ``type`` says which fields are meaningful.
    """

    type: StatusType
    message_id: str | None = None
    chars: int | None = None
    final: bool | None = None
    message_ids: tuple[str, ...] = ()
    error: str | None = None

    @classmethod
    def from_json(cls, data: object) -> AdapterStreamStatus:
        obj = _obj(data, "status line")
        kind = obj.get("type")
        if kind in ("message_created", "message_updated", "message_sent"):
            mid = obj.get("messageId")
            if not isinstance(mid, str | int) or isinstance(mid, bool):
                raise ProtocolError(f"{kind} needs a 'messageId'")
            chars = obj.get("chars")
            if kind == "message_updated" and (not isinstance(chars, int) or isinstance(chars, bool)):
                raise ProtocolError("message_updated needs an integer 'chars'")
            final = obj.get("final")
            if kind == "message_sent" and not isinstance(final, bool):
                raise ProtocolError("message_sent needs a boolean 'final'")
            return cls(kind, message_id=_message_id(mid, "messageId"), chars=chars, final=final)
        if kind == "delivery_complete":
            ids = obj.get("messageIds")
            if not isinstance(ids, list):
                raise ProtocolError("delivery_complete needs a 'messageIds' list")
            return cls(kind, message_ids=tuple(_message_ids(ids, "messageIds")))
        if kind == "delivery_error":
            return cls(kind, error=said(obj.get("error", "unknown error")))
        raise ProtocolError(f"unknown status type {kind!r}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.type == "delivery_complete":
            out["messageIds"] = list(self.message_ids)
        elif self.type == "delivery_error":
            out["error"] = self.error
        else:
            out["messageId"] = self.message_id
            if self.type == "message_updated":
                out["chars"] = self.chars
            if self.type == "message_sent":
                out["final"] = bool(self.final)
        return out
