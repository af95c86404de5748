"""How real providers word and shape their errors, shared by the scripted model and the fake server."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from nexus.testing.steps import HttpError

Flavor: TypeAlias = Literal["anthropic", "openai"]

_ANTHROPIC: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low to access the Anthropic API."),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}

_OPENAI: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request"),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: sk-fake***. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    402: (
        "insufficient_quota",
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    403: (
        "invalid_request_error",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported",
    ),
    404: ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again in 1s."),
    500: ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    503: ("server_error", None, "The engine is currently overloaded, please try again later"),
}


def default_message(status: int, flavor: Flavor) -> str:
    """The message a provider sends with ``status`` when the script gives none."""
    if flavor == "anthropic":
        return _ANTHROPIC.get(status, ("api_error", f"HTTP {status}"))[1]
    return _OPENAI.get(status, ("server_error", None, f"HTTP {status}"))[2]


def error_body(status: int, message: str, flavor: Flavor) -> dict[str, Any]:
    """The JSON body of an error response in the provider's shape."""
    if flavor == "anthropic":
        kind = _ANTHROPIC.get(status, ("api_error", ""))[0]
        return {"type": "error", "error": {"type": kind, "message": message}}
    err_type, code, usual = _OPENAI.get(status, ("server_error", None, ""))
    if message != usual:
        code = None  # e.g. a custom 401 text is not necessarily an invalid key
    return {"error": {"message": message, "type": err_type, "param": None, "code": code}}


def overflow_message(style: str, tokens: int, maximum: int) -> str:
    """The provider's context-overflow wording (what overflow detectors match on)."""
    if style == "anthropic":
        return f"prompt is too long: {tokens} tokens > {maximum} maximum"
    if style == "llama.cpp":
        return "the request exceeds the available context size, try increasing it"
    return (
        f"This model's maximum context length is {maximum} tokens. However, your messages resulted in "
        f"{tokens} tokens. Please reduce the length of the messages."
    )


def overflow_body(style: str, tokens: int, maximum: int) -> dict[str, Any]:
    """The JSON body of an overflow error (HTTP 400) in the style's shape."""
    message = overflow_message(style, tokens, maximum)
    if style == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    if style == "llama.cpp":
        return {
            "error": {
                "code": 400,
                "message": message,
                "type": "exceed_context_size_error",
                "n_prompt_tokens": tokens,
                "n_ctx": maximum,
            }
        }
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


HTML_PAGE = (
    "<html>\r\n<head><title>{status} Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>{status} Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


def http_error_headers(step: HttpError) -> dict[str, str]:
    """Headers of an ``http_error`` response: the scripted ones plus ``retry-after``."""
    headers = dict(step.headers)
    if step.retry_after is not None:
        seconds = float(step.retry_after)
        headers["retry-after"] = str(int(seconds)) if seconds.is_integer() else str(seconds)
    return headers


def http_error_body(step: HttpError, flavor: Flavor) -> str:
    """The body text of an ``http_error`` response (scripted body, or the provider's usual error JSON)."""
    if isinstance(step.body, str):
        return step.body
    if step.body is not None:
        return json.dumps(dict(step.body), ensure_ascii=False)
    return json.dumps(error_body(step.status, step.message or default_message(step.status, flavor), flavor))


def stream_error_event(status: int, message: str | None, flavor: Flavor) -> tuple[bytes, str]:
    """The in-stream error SSE event, and the text a provider adapter makes of it."""
    text = message or default_message(status, flavor)
    body = error_body(status, text, flavor)
    if flavor == "anthropic":
        frame = f"event: error\ndata: {json.dumps(body, ensure_ascii=False)}\n\n".encode()
        return frame, f"{body['error']['type']}: {text}"
    frame = f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()
    code = body["error"]["code"] or body["error"]["type"]
    return frame, (f"{code}: {text}" if code and str(code) not in text else text)
