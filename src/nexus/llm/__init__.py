"""Provider-neutral LLM streaming: messages, events, providers, model catalog, errors.

Everything a caller needs is importable from here::

    from nexus.llm import Context, UserMessage, get_model, stream, complete

Importing this package is cheap (no HTTP client, no provider code): providers and
httpx load on the first call.
"""

from __future__ import annotations

from nexus.errors import UnknownProviderError
from nexus.llm.abort import AbortSignal
from nexus.llm.catalog import DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_TOKENS, get_model, list_models, list_providers
from nexus.llm.errors import ClassifiedError, classify_error, is_context_overflow, parse_retry_after
from nexus.llm.events import (
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from nexus.llm.keys import api_key_env_vars, known_providers, resolve_api_key, resolve_base_url
from nexus.llm.options import StreamFn, StreamOptions, ToolChoice
from nexus.llm.registry import known_apis, register_api, resolve_api, unregister_api
from nexus.llm.serde import (
    MessageFormatError,
    message_from_dict,
    message_from_json,
    message_to_dict,
    message_to_json,
    model_from_dict,
    model_to_dict,
)
from nexus.llm.stream import aclose_http_client, complete, stream
from nexus.llm.types import (
    ERROR_KINDS,
    THINKING_LEVELS,
    AssistantContent,
    AssistantMessage,
    ContentBlock,
    Context,
    Cost,
    ErrorKind,
    ImageContent,
    Message,
    Model,
    StopReason,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
    now_ms,
)

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MAX_TOKENS",
    "ERROR_KINDS",
    "THINKING_LEVELS",
    "AbortSignal",
    "AssistantContent",
    "AssistantMessage",
    "AssistantMessageEvent",
    "ClassifiedError",
    "ContentBlock",
    "Context",
    "Cost",
    "DoneEvent",
    "ErrorEvent",
    "ErrorKind",
    "ImageContent",
    "Message",
    "MessageFormatError",
    "Model",
    "StartEvent",
    "StopReason",
    "StreamFn",
    "StreamOptions",
    "TextContent",
    "TextDeltaEvent",
    "TextEndEvent",
    "TextStartEvent",
    "ThinkingContent",
    "ThinkingDeltaEvent",
    "ThinkingEndEvent",
    "ThinkingLevel",
    "ThinkingStartEvent",
    "Tool",
    "ToolCall",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolChoice",
    "ToolResultMessage",
    "UnknownProviderError",
    "Usage",
    "UserContent",
    "UserMessage",
    "aclose_http_client",
    "api_key_env_vars",
    "classify_error",
    "complete",
    "get_model",
    "is_context_overflow",
    "known_apis",
    "known_providers",
    "list_models",
    "list_providers",
    "message_from_dict",
    "message_from_json",
    "message_to_dict",
    "message_to_json",
    "model_from_dict",
    "model_to_dict",
    "now_ms",
    "parse_retry_after",
    "register_api",
    "resolve_api",
    "resolve_api_key",
    "resolve_base_url",
    "stream",
    "unregister_api",
]
