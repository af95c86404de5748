"""Provider-neutral LLM streaming: messages, events, providers, model catalog, errors.

Everything a caller needs is importable from here::

    from nexus.llm import Context, UserMessage, get_model, stream, complete

Importing this package is cheap (no HTTP client, no provider code): providers and
httpx load on the first call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute
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
from nexus.llm.keys import (
    api_key_env_vars,
    base_url_env_var,
    effective_base_url,
    known_providers,
    resolve_api_key,
    resolve_base_url,
)
from nexus.llm.options import StreamFn, StreamOptions, ToolChoice
from nexus.llm.redact import redact
from nexus.llm.registry import known_apis, register_api, resolve_api, unregister_api
from nexus.llm.serde import (
    MessageFormatError,
    event_from_dict,
    event_from_json,
    event_to_dict,
    event_to_json,
    message_from_dict,
    message_from_json,
    message_to_dict,
    message_to_json,
    model_from_dict,
    model_from_json,
    model_to_dict,
    model_to_json,
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
    "CHARS_PER_TOKEN",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MODEL_ID",
    "ERROR_KINDS",
    "THINKING_LEVELS",
    "AbortSignal",
    "AssistantContent",
    "AssistantMessage",
    "AssistantMessageEvent",
    "CaptureFormatError",
    "CaptureRecord",
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
    "TerminalProgress",
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
    "aclose_client",
    "aclose_http_client",
    "add_call_usage",
    "add_secrets",
    "api_key_env_vars",
    "apply_cost",
    "base_url_env_var",
    "base_url_missing",
    "block_from_dict",
    "block_to_dict",
    "classify_error",
    "complete",
    "effective_base_url",
    "error_text_from_body",
    "estimate_message_tokens",
    "estimate_text_tokens",
    "estimate_tool_tokens",
    "event_from_dict",
    "event_from_json",
    "event_to_dict",
    "event_to_json",
    "get_model",
    "is_context_overflow",
    "is_local_url",
    "key_required",
    "key_shaped",
    "known_apis",
    "known_providers",
    "known_secrets",
    "list_models",
    "list_providers",
    "load_capture",
    "local_model",
    "message_from_dict",
    "message_from_json",
    "message_to_dict",
    "message_to_json",
    "model_from_dict",
    "model_from_json",
    "model_to_dict",
    "model_to_json",
    "now_ms",
    "parse_retry_after",
    "redact",
    "register_api",
    "register_local_model",
    "resolve_api",
    "resolve_api_key",
    "resolve_base_url",
    "schema_chars",
    "scrub",
    "secret_name",
    "set_capture_dir",
    "set_progress_reporter",
    "stream",
    "unregister_api",
]

if TYPE_CHECKING:
    from nexus.llm._http import aclose_client
    from nexus.llm.capture import CaptureFormatError, CaptureRecord, load_capture, set_capture_dir
    from nexus.llm.errors import error_text_from_body
    from nexus.llm.keys import base_url_missing, is_local_url, key_required
    from nexus.llm.providers._llama_progress import TerminalProgress, set_progress_reporter
    from nexus.llm.providers.llama_cpp import DEFAULT_MODEL_ID, local_model, register_local_model
    from nexus.llm.redact import add_secrets, key_shaped, known_secrets, scrub, secret_name
    from nexus.llm.serde import block_from_dict, block_to_dict
    from nexus.llm.tokens import (
        CHARS_PER_TOKEN,
        estimate_message_tokens,
        estimate_text_tokens,
        estimate_tool_tokens,
        schema_chars,
    )
    from nexus.llm.types import add_call_usage, apply_cost

_LAZY: dict[str, str] = {
    "scrub": "nexus.llm.redact",
    "CHARS_PER_TOKEN": "nexus.llm.tokens",
    "CaptureFormatError": "nexus.llm.capture",
    "CaptureRecord": "nexus.llm.capture",
    "DEFAULT_MODEL_ID": "nexus.llm.providers.llama_cpp",
    "TerminalProgress": "nexus.llm.providers._llama_progress",
    "aclose_client": "nexus.llm._http",
    "add_call_usage": "nexus.llm.types",
    "add_secrets": "nexus.llm.redact",
    "apply_cost": "nexus.llm.types",
    "base_url_missing": "nexus.llm.keys",
    "block_from_dict": "nexus.llm.serde",
    "block_to_dict": "nexus.llm.serde",
    "error_text_from_body": "nexus.llm.errors",
    "estimate_message_tokens": "nexus.llm.tokens",
    "estimate_text_tokens": "nexus.llm.tokens",
    "estimate_tool_tokens": "nexus.llm.tokens",
    "is_local_url": "nexus.llm.keys",
    "key_required": "nexus.llm.keys",
    "key_shaped": "nexus.llm.redact",
    "known_secrets": "nexus.llm.redact",
    "load_capture": "nexus.llm.capture",
    "local_model": "nexus.llm.providers.llama_cpp",
    "register_local_model": "nexus.llm.providers.llama_cpp",
    "schema_chars": "nexus.llm.tokens",
    "secret_name": "nexus.llm.redact",
    "set_capture_dir": "nexus.llm.capture",
    "set_progress_reporter": "nexus.llm.providers._llama_progress",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)
