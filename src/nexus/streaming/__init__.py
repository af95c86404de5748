"""The streaming bridge (seed 004): ``StreamEvent``s from a run to any chat platform.

- :mod:`nexus.streaming.events`: ``StreamEvent`` (``stream_start | token | reasoning |
  tool_status | stream_end | stream_error``) with the seed's JSON field names.
- :class:`StreamRouter`: one delivery to an adapter, natively (its ``stream`` process) or
  through the :class:`BlockPipeline` (chunker, idle flush, human delay) and ``send``.
- :func:`~nexus.streaming.tool_status.summary`: the human line per tool call.
- :func:`~nexus.streaming.from_engine.stream_events`: a run's StreamEvents, over its event channel.
- :class:`~nexus.streaming.deliver.Deliverer`: a run's reply to an adapter target, recorded with its turn.

The router and pipeline are imported on first use so ``import nexus.streaming`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute
from nexus.streaming.events import (
    Reasoning,
    StreamEnd,
    StreamError,
    StreamEvent,
    StreamStart,
    Token,
    ToolStatus,
    from_json,
    is_terminal,
    to_line,
)

if TYPE_CHECKING:
    from nexus.streaming.chunker import Block, BlockChunker
    from nexus.streaming.deliver import Deliverer
    from nexus.streaming.from_engine import stream_events
    from nexus.streaming.pipeline import BlockPipeline, PipelineReport
    from nexus.streaming.router import DeliveryReport, StreamRouter
    from nexus.streaming.settings import CHANNEL_DEFAULTS, BlockSettings, block_settings
    from nexus.streaming.targets import DeliveryTargetError, check_target, parse_target
    from nexus.streaming.tool_status import summary

_LAZY = {
    "Block": ".chunker",
    "BlockChunker": ".chunker",
    "Deliverer": ".deliver",
    "stream_events": ".from_engine",
    "BlockPipeline": ".pipeline",
    "PipelineReport": ".pipeline",
    "DeliveryReport": ".router",
    "StreamRouter": ".router",
    "CHANNEL_DEFAULTS": ".settings",
    "BlockSettings": ".settings",
    "block_settings": ".settings",
    "summary": ".tool_status",
    "DeliveryTargetError": "nexus.streaming.targets",
    "check_target": "nexus.streaming.targets",
    "parse_target": "nexus.streaming.targets",
}

__all__ = [
    "CHANNEL_DEFAULTS",
    "Block",
    "BlockChunker",
    "BlockPipeline",
    "BlockSettings",
    "Deliverer",
    "DeliveryReport",
    "DeliveryTargetError",
    "PipelineReport",
    "Reasoning",
    "StreamEnd",
    "StreamError",
    "StreamEvent",
    "StreamRouter",
    "StreamStart",
    "Token",
    "ToolStatus",
    "block_settings",
    "check_target",
    "from_json",
    "is_terminal",
    "parse_target",
    "stream_events",
    "summary",
    "to_line",
]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)
