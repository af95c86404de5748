"""Error classification, retry-after parsing and the context-overflow detector."""

from __future__ import annotations

import pytest

from nexus.llm import AssistantMessage, Usage, classify_error, is_context_overflow, parse_retry_after
from nexus.llm.errors import error_text_from_body

OVERFLOW_PHRASES = [
    "prompt is too long: 213462 tokens > 200000 maximum",  # Anthropic
    "input is too long for requested model",  # Bedrock
    "Your input exceeds the context window of this model",  # OpenAI (Responses)
    # OpenAI chat completions (code context_length_exceeded)
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
    "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",  # Gemini
    "This model's maximum prompt length is 131072 but the request contains 537812 tokens",  # xAI
    "Please reduce the length of the messages or completion",  # Groq
    "This endpoint's maximum context length is 131072 tokens. However, you requested about 140000 tokens",  # OpenRouter
    "prompt token count of 150000 exceeds the limit of 128000",  # Copilot
    "the request exceeds the available context size, try increasing it",  # llama.cpp
    # LM Studio
    "Trying to keep the first 9000 tokens when context the overflows. "
    "However, the model is loaded with context length of 4096. greater than the context length",
    # Mistral
    "Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 maximum context length",
    "invalid params, context window exceeds limit (2013)",  # MiniMax
    "Invalid request: Your request exceeded model token limit: 262144",  # Kimi
    "model_context_window_exceeded",  # z.ai
    "context_length_exceeded",
    "413 status code (no body)",  # Cerebras
]


@pytest.mark.parametrize("text", OVERFLOW_PHRASES)
def test_overflow_phrasings(text: str) -> None:
    assert is_context_overflow(text)
    msg = AssistantMessage(stop_reason="error", error_message=text)
    assert is_context_overflow(msg)
    assert classify_error(text).kind == "context_overflow"


def test_rate_limit_on_tokens_per_minute_is_not_overflow() -> None:
    text = "Request too large for model llama in organization on tokens per minute (TPM): Limit 6000, Requested 9000"
    assert not is_context_overflow(text)
    assert classify_error(text, 413).kind == "rate_limit"


def test_silent_overflow_from_usage() -> None:
    ok = AssistantMessage(stop_reason="stop", usage=Usage(input=150_000, cache_read=60_000))
    assert is_context_overflow(ok, context_window=200_000)
    assert not is_context_overflow(ok, context_window=256_000)
    assert not is_context_overflow(ok)
    assert is_context_overflow(AssistantMessage(stop_reason="error", error_kind="context_overflow", error_message="x"))
    assert not is_context_overflow(AssistantMessage(stop_reason="error", error_message="Overloaded"))
    # our own chars/4 guess (the server reported no usage) is no evidence the server truncated
    guessed = AssistantMessage(stop_reason="stop", usage=Usage(input=250_000, estimated=True))
    assert not is_context_overflow(guessed, context_window=200_000)


@pytest.mark.parametrize(
    ("status", "text", "kind"),
    [
        (401, "Unauthorized", "auth"),
        (401, "Incorrect API key provided: sk-abc", "auth_permanent"),
        (403, "invalid x-api-key", "auth_permanent"),
        (403, "Forbidden", "auth"),
        (402, "Payment required", "billing"),
        (402, "daily spend limit reached, try again tomorrow", "rate_limit"),
        (429, "Rate limit reached", "rate_limit"),
        (429, "You exceeded your current quota, please check your plan and billing details", "billing"),
        (408, "Request timeout", "timeout"),
        (500, "Internal server error", "timeout"),
        (502, "Bad gateway", "timeout"),
        (503, "The server is overloaded", "overloaded"),
        (503, "Service unavailable", "timeout"),
        (529, "Overloaded", "overloaded"),
        (400, "messages.1.content.0.tool_use.id: String should match pattern", "format"),
        (404, "model not found", "unknown"),
        (400, "API key not valid. Please pass a valid API key.", "auth_permanent"),  # Gemini
        (400, "INVALID_ARGUMENT: API key expired. Please renew the API key.", "auth"),  # Gemini
        (429, "Too many tokens, please wait before trying again.", "rate_limit"),  # Bedrock throttling
        (400, "Your credit balance is too low to access the Anthropic API.", "billing"),
        (402, "Insufficient credits", "billing"),  # OpenRouter
        (400, "tools.0.custom.input_schema: JSON schema is invalid", "format"),
        (None, "overloaded_error: Overloaded", "overloaded"),
        (None, "Read timed out", "timeout"),
        (None, "connect ECONNREFUSED 127.0.0.1:8080", "network"),
        (None, "read ECONNRESET", "network"),
        (None, "socket hang up", "network"),
        (None, "Connection reset by peer", "network"),
        (None, "peer closed connection without sending complete message body", "network"),
        (None, "Connection timed out", "timeout"),  # slow, not broken
        (None, "insufficient credit balance", "billing"),
        (None, "something odd", "unknown"),
        (None, "server_error: HTTP 529", "overloaded"),
        (None, "api_error: status code 401", "auth"),
    ],
)
def test_classification(status: int | None, text: str, kind: str) -> None:
    assert classify_error(text, status).kind == kind


def test_retry_after_sources() -> None:
    assert parse_retry_after({"Retry-After": "12"}) == 12.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # a date in the past
    assert parse_retry_after(None, "Rate limit reached. Please try again in 1.5s.") == 1.5
    assert parse_retry_after(None, "Please retry in 250ms") == 0.25
    assert parse_retry_after(None, '{"@type": "RetryInfo", "retryDelay": "20s"}') == 20.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after(None, "no hint") is None
    found = classify_error("429 slow down", 429, {"retry-after": "3"})
    assert (found.kind, found.retry_after, found.status) == ("rate_limit", 3.0, 429)


def test_error_text_from_bodies() -> None:
    assert error_text_from_body(400, '{"error": {"type": "invalid_request_error", "message": "bad"}}') == (
        "400 invalid_request_error: bad"
    )
    assert error_text_from_body(500, '{"error": "boom"}') == "500 boom"
    assert error_text_from_body(422, '{"detail": "missing field"}') == "422 missing field"
    assert error_text_from_body(413, "") == "413 status code (no body)"
    html = "<!DOCTYPE html><html><head><title>503 Service Temporarily Unavailable</title></head></html>"
    assert error_text_from_body(503, html) == "503 HTML error page: 503 Service Temporarily Unavailable"
    assert error_text_from_body(500, "plain\n  text") == "500 plain text"
