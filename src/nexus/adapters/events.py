"""Inbound: ``NexusEvent`` lines from ``monitor``, validated, deduplicated and keyed to a session.

The schema is the adapter protocol's v2 (reference/nexus-specs.md §4): unknown fields are
refused (``additionalProperties: false``), which also refuses the legacy ``channel`` /
``peer_*`` names. A line that fails is refused with the reason (pydantic's, in one line)
and nothing runs for it. ``timestamp`` is Unix milliseconds.
"""

from __future__ import annotations

import collections
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nexus.adapters.types import DeliveryTarget, ProtocolError

ContentType = Literal["text", "image", "audio", "video", "file", "reaction", "membership"]
ContainerKind = Literal["dm", "direct", "group", "channel"]


class Attachment(BaseModel):
    """A file that came with the message (a URL to fetch or a local path the adapter wrote)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    filename: str
    content_type: str
    size_bytes: int | None = Field(default=None, ge=0)
    url: str | None = None
    path: str | None = None


class NexusEvent(BaseModel):
    """One inbound message (or reaction, membership change) from a platform."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    event_id: str = Field(min_length=1)
    timestamp: int = Field(ge=0)
    content: str
    content_type: ContentType
    platform: str = Field(min_length=1)
    account_id: str = Field(min_length=1)
    sender_id: str = Field(min_length=1)
    container_id: str = Field(min_length=1)
    container_kind: ContainerKind
    sender_name: str | None = None
    space_id: str | None = None
    space_name: str | None = None
    container_name: str | None = None
    thread_id: str | None = None
    thread_name: str | None = None
    reply_to_id: str | None = None
    attachments: list[Attachment] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    delivery_metadata: dict[str, Any] = Field(default_factory=dict)


def parse_event(line: bytes | str) -> NexusEvent:
    """Parse and validate one ``monitor`` line; :class:`ProtocolError` with the reason otherwise."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"not JSON ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise ProtocolError("a NexusEvent must be a JSON object")
    try:
        return NexusEvent.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'event'}: {err['msg']}" for err in exc.errors())
        raise ProtocolError(f"NexusEvent refused: {problems}") from None


def session_key(event: NexusEvent) -> str:
    """``dm:<platform>:<sender>`` for direct messages, ``group:<platform>:<container>[:thread:<id>]`` otherwise.

    The ids come from the adapter, and any of them may hold the ``:`` that separates them: a group
    ``g1:thread:9`` would share the key of group ``g1``'s thread ``9``. So the platform and the container,
    each followed by another part, have ``%`` and ``:`` written ``%25`` and ``%3A``; the sender and the
    thread id end the key and stay as they are. An id without ``:`` or ``%`` keeps the key it always had
    (and its session's history).
    """
    platform = _key_part(event.platform)
    if event.container_kind in ("dm", "direct"):
        return f"dm:{platform}:{event.sender_id}"
    key = f"group:{platform}:{_key_part(event.container_id)}"
    return f"{key}:thread:{event.thread_id}" if event.thread_id else key


def _key_part(value: str) -> str:
    """``value`` with no ``:`` left in it, so the next ``:`` of a session key ends it (``%`` escapes)."""
    if ":" not in value and "%" not in value:
        return value
    return value.replace("%", "%25").replace(":", "%3A")


def reply_target(event: NexusEvent, channel: str) -> DeliveryTarget:
    """Where the reply to ``event`` goes: the same container and thread, replying to the message.

    ``channel`` is the adapter's name in ``nexus.toml`` (the event's ``platform`` names the
    platform, and one platform may have several adapters). The message replied to is
    ``delivery_metadata.message_id`` when the adapter gave one.
    """
    message_id = event.delivery_metadata.get("message_id")
    return DeliveryTarget(
        channel=channel,
        account_id=event.account_id,
        to=event.container_id,
        thread_id=event.thread_id,
        reply_to_id=str(message_id) if message_id is not None else event.reply_to_id,
    )


class EventDeduper:
    """Remembers the last ``capacity`` event ids so a redelivered event is recognised (bounded memory)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._capacity = capacity

    def first_time(self, event_id: str) -> bool:
        """True the first time ``event_id`` is seen; False for a duplicate."""
        if event_id in self._seen:
            self._seen.move_to_end(event_id)
            return False
        self._seen[event_id] = None
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        return True
