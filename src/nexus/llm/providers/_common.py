"""What every HTTP provider shares: the request/stream driver, failures, usage cost.

A provider supplies a :class:`ProviderSpec` (build the request, make a decoder for its
SSE events); :func:`run_stream` does the rest: key and base-URL resolution, the HTTP
call on the shared client, status and body classification, SSE parsing, abort and
cancellation, and the guarantee that the stream ends with exactly one ``done`` or
``error`` event and never raises.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from nexus._dataclass import dataclass
from nexus.llm._http import get_client, make_timeout
from nexus.llm._sse import SSEParser
from nexus.llm.abort import AbortSignal
from nexus.llm.errors import classify_error, error_text_from_body
from nexus.llm.events import AssistantMessageEvent, DoneEvent, ErrorEvent, StartEvent
from nexus.llm.keys import (
    effective_base_url,
    is_local_url,
    key_required,
    missing_base_url_message,
    missing_key_message,
    resolve_api_key,
)
from nexus.llm.options import StreamOptions
from nexus.llm.redact import redact, secret_name
from nexus.llm.tokens import estimate_message_tokens, estimate_prompt_tokens
from nexus.llm.types import (
    AssistantMessage,
    Context,
    ErrorKind,
    Model,
    TextContent,
    ThinkingContent,
    apply_cost,
)

if TYPE_CHECKING:
    import httpx

_MAX_ERROR_BODY = 64 * 1024
_DRAIN_SECONDS = 1.0


class StreamFailure(Exception):
    """Raised inside a provider to end the stream with a classified error message."""

    def __init__(
        self, kind: ErrorKind, message: str, retry_after: float | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.retry_after = retry_after
        self.status = status


def failure_from_text(
    message: str, status: int | None = None, headers: Mapping[str, str] | None = None
) -> StreamFailure:
    """Classify an error text (and status/headers) into a :class:`StreamFailure`."""
    found = classify_error(message, status, headers)
    return StreamFailure(found.kind, message, found.retry_after, status)


def refusal_failure(explanation: str, filtered: bool = False) -> StreamFailure:
    """A refusal (the model declined) or a content filter (the provider stopped it), kind ``refusal``.

    The provider's own explanation is kept in the message: it is the only clue the user
    gets about what to rephrase. Retrying the same request does not help.
    """
    what = "the provider's content filter stopped the response" if filtered else "the model refused to answer"
    detail = " ".join(explanation.split())
    return StreamFailure("refusal", f"{what}: {detail}" if detail else f"{what} (no explanation given)")


def output_with_reasoning(output: int, reasoning: int, prompt: int, total: object) -> int:
    """Output tokens with the reasoning included, whichever convention the server follows.

    OpenAI counts reasoning inside ``completion_tokens`` / ``output_tokens``; xAI counts it
    beside them, and its ``total_tokens`` is prompt + completion + reasoning. The total
    tells the two apart; without one (or when it fits neither) the OpenAI reading stands.
    """
    if reasoning > 0 and isinstance(total, int) and total != prompt + output and total == prompt + output + reasoning:
        return output + reasoning
    return output


class Decoder(Protocol):
    """Turns one provider's SSE events into stream events, filling ``output``."""

    output: AssistantMessage
    finished: bool

    def handle(self, name: str | None, data: str) -> list[AssistantMessageEvent]:
        """Events for one SSE event; raise :class:`StreamFailure` for provider errors."""
        ...

    def finish(self) -> list[AssistantMessageEvent]:
        """Close open blocks (their ``*_end`` events) after the provider's stop event."""
        ...

    def settle(self) -> None:
        """Make ``output`` hold everything received so far (before an error ends the stream)."""
        ...

    def complete(self) -> bool:
        """Did the provider's own stop event arrive (so the response is whole)?"""
        ...


@dataclass(slots=True, frozen=True)
class Request:
    """A provider request ready to send."""

    url: str
    headers: dict[str, str]
    payload: dict[str, Any]


class ProviderSpec(Protocol):
    """One wire protocol: how to build its request and decode its stream."""

    def build_request(
        self, model: Model, context: Context, options: StreamOptions, api_key: str | None, base_url: str
    ) -> Request:
        """The request for this call (may raise :class:`StreamFailure` for unusable input)."""
        ...

    def decoder(self, model: Model, output: AssistantMessage) -> Decoder:
        """A fresh decoder filling ``output``."""
        ...


def append_text(block: TextContent, delta: str) -> None:
    """Append in amortised O(1): dropping the block's reference first lets CPython grow the string in place."""
    text = block.text
    block.text = ""
    text += delta
    block.text = text


def append_thinking(block: ThinkingContent, delta: str) -> None:
    """Like :func:`append_text` for thinking blocks."""
    text = block.thinking
    block.thinking = ""
    text += delta
    block.thinking = text


class _IOGate:
    """Lets an abort signal cancel the stream's task, but only while it waits on the network."""

    __slots__ = ("active", "fired", "task")

    def __init__(self) -> None:
        self.task = asyncio.current_task()
        self.active = False
        self.fired = False

    def enter(self) -> None:
        """About to wait on the network, from whichever task is driving the stream right now.

        The task is looked up each time: a consumer may pull every event from a new task
        (``asyncio.wait_for(it.__anext__(), t)`` does), and cancelling the first one would miss.
        """
        self.task = asyncio.current_task()
        self.active = True

    def on_abort(self) -> None:
        if self.active and self.task is not None and not self.fired:
            self.fired = True
            self.task.cancel()


def _error_event(output: AssistantMessage, failure: StreamFailure, secrets: Iterable[str | None]) -> ErrorEvent:
    """The error event; its text never repeats a credential (the provider may quote the key it refused)."""
    output.stop_reason = "error"
    output.error_kind = failure.kind
    output.error_message = redact(failure.message, secrets)
    output.retry_after = failure.retry_after
    return ErrorEvent("error", output)


def _aborted_event(output: AssistantMessage, reason: str | None) -> ErrorEvent:
    output.stop_reason = "aborted"
    output.error_message = reason or "aborted"
    return ErrorEvent("aborted", output)


class _Aborted(Exception):
    """The abort signal fired between two events."""


def _decode(decoder: Decoder, name: str | None, data: str) -> list[AssistantMessageEvent]:
    """The decoder's events for one SSE event; a shape it cannot read becomes a ``malformed`` failure."""
    try:
        return decoder.handle(name, data)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        raise _malformed(exc, data) from exc


async def run_stream(
    spec: ProviderSpec, model: Model, context: Context, options: StreamOptions | None
) -> AsyncIterator[AssistantMessageEvent]:
    """Drive one provider call (the module doc says what it guarantees). Task cancellation ends the
    stream with an ``error`` event of reason ``aborted``; the ``CancelledError`` is not re-raised, and
    the task's ``cancelling()`` count stays set so callers can still tell."""
    opts = options if options is not None else StreamOptions()
    output = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    signal = opts.signal
    gate = _IOGate()
    remove_listener = signal.add_listener(gate.on_abort) if signal is not None else None
    decoder: Decoder | None = None
    response: httpx.Response | None = None
    chunks: AsyncIterator[bytes] | None = None
    started = False
    request: Request | None = None
    try:
        if signal is not None and signal.aborted:
            raise _Aborted
        request = _prepare(spec, model, context, opts)
        decoder = spec.decoder(model, output)
        response = await _open(request, opts, gate)
        started = True
        yield StartEvent(output)
        parser = SSEParser()
        chunks = response.aiter_bytes()
        while not decoder.finished:
            gate.enter()
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                break
            finally:
                gate.active = False
            for name, data in parser.feed(chunk):
                for event in _decode(decoder, name, data):
                    yield event
                    if signal is not None and signal.reason is not None:
                        raise _Aborted
        async for event in _after_body(decoder, parser, chunks, request):
            yield event
        # release the connection before the final events, so a consumer that stops at
        # ``done`` without closing the iterator leaks nothing
        closing, chunks, response = (chunks, response), None, None
        await _close(*closing)
        for event in decoder.finish():
            yield event
        estimate_missing_usage(model, context, output)
        stop = output.stop_reason
        yield DoneEvent(stop if stop == "length" or stop == "tool_use" else "stop", output)
    except (_Aborted, asyncio.CancelledError, Exception) as exc:  # the contract: a stream never raises
        final = _final_error(exc, output, decoder, gate, signal, _request_secrets(opts, request))
        if started:  # the server took the request: it cost tokens even if it did not say how many
            estimate_missing_usage(model, context, output)
        yield final
    finally:
        if remove_listener is not None:
            remove_listener()
        await _close(chunks, response)


async def _after_body(
    decoder: Decoder, parser: SSEParser, chunks: AsyncIterator[bytes], request: Request
) -> AsyncIterator[AssistantMessageEvent]:
    """The end of the body: a finished response's rest is drained unread; an unfinished one's last
    buffered lines are decoded, and if that still does not complete it, the connection was cut."""
    if decoder.finished:
        await _drain(chunks)
    else:
        for name, data in parser.flush():
            for event in _decode(decoder, name, data):
                yield event
    if not decoder.complete():
        raise StreamFailure(
            "network", f"the connection to {_request_url_of(request)} closed before the response finished"
        )


def estimate_missing_usage(model: Model, context: Context, output: AssistantMessage) -> None:
    """Fill in the counts a server did not report (chars/4 of the request and the reply) and mark them.

    llama.cpp's server, for one, sends no usage even with ``stream_options.include_usage``;
    storing 0 would present "no tokens" as a measurement. A request always has input, so a
    zero input (cached or not) means "not reported"; so does a zero output beside content.
    """
    usage = output.usage
    filled = False
    if usage.input + usage.cache_read + usage.cache_write == 0:
        usage.input = estimate_prompt_tokens(context)
        filled = usage.input > 0
    if usage.output == 0 and output.content:
        usage.output = estimate_message_tokens(output)
        filled = filled or usage.output > 0
    if filled:
        usage.estimated = True
        apply_cost(model, usage)


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what follows the provider's final event, so the connection goes back to the pool.

    Bounded in time and size: a server that keeps talking after its stop event only
    costs us the connection, never the response.
    """
    read = 0
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for chunk in chunks:
                read += len(chunk)
                if read > _MAX_ERROR_BODY:
                    return
    except Exception:  # a drain failure only means the connection is not reused
        return


def _malformed(exc: Exception, data: str) -> StreamFailure:
    """A decoder tripped over well-formed JSON of an unexpected shape: report the data, not a Python error."""
    if isinstance(exc, StreamFailure):
        return exc
    return StreamFailure("unknown", f"malformed SSE data from provider ({type(exc).__name__}: {exc}): {excerpt(data)}")


def excerpt(data: str, limit: int = 200) -> str:
    """The start of a provider's data for an error text, quoted; redacted before it is cut (a cut key goes unseen)."""
    return repr(redact(data)[:limit])


async def _close(chunks: AsyncIterator[bytes] | None, response: httpx.Response | None) -> None:
    if chunks is not None:
        await chunks.aclose()  # type: ignore[attr-defined]
    if response is not None:
        await response.aclose()


def _final_error(
    exc: BaseException,
    output: AssistantMessage,
    decoder: Decoder | None,
    gate: _IOGate,
    signal: AbortSignal | None,
    secrets: Iterable[str | None],
) -> ErrorEvent:
    """The terminal event for an exception that ended the stream (abort, cancel, failure, bug)."""
    if decoder is not None:
        decoder.settle()
    if isinstance(exc, (_Aborted, asyncio.CancelledError)):
        if gate.fired and gate.task is not None:
            gate.task.uncancel()  # the cancel was ours, turned into the aborted event
        return _aborted_event(output, signal.reason if signal is not None and signal.aborted else "cancelled")
    failure = exc if isinstance(exc, StreamFailure) else _failure_from_exception(exc)
    return _error_event(output, failure, secrets)


def _request_secrets(opts: StreamOptions, request: Request | None) -> list[str | None]:
    """The credentials this call sent: its key and the values of credential headers (config ``headers`` too)."""
    headers = {**(request.headers if request is not None else {}), **dict(opts.headers)}
    found: list[str | None] = [opts.api_key]
    for name, value in headers.items():
        if secret_name(name):
            scheme, _, token = value.partition(" ")
            found.append(token if token and scheme.lower() in ("bearer", "basic", "token") else value)
    return found


def _prepare(spec: ProviderSpec, model: Model, context: Context, opts: StreamOptions) -> Request:
    base_url = effective_base_url(model, opts)
    if base_url is None:
        raise StreamFailure("format", missing_base_url_message(model.provider))
    api_key = resolve_api_key(model.provider, opts.api_key)
    if api_key is None and key_required(model.provider, base_url):
        # permanent for this process: retrying (or backing off) cannot make a key appear
        raise StreamFailure("auth_permanent", missing_key_message(model.provider))
    return spec.build_request(model, context, opts, api_key, base_url)


async def _open(request: Request, opts: StreamOptions, gate: _IOGate) -> httpx.Response:
    """Send the request; a status >= 400 becomes a classified :class:`StreamFailure`."""
    client = get_client()
    headers = {**request.headers, **dict(opts.headers)}
    # lone surrogates (from broken tool output, say) cannot be UTF-8 encoded; send U+FFFD instead of failing
    content = json.dumps(request.payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
    built = client.build_request(
        "POST", request.url, content=content, headers=headers, timeout=make_timeout(opts.timeout)
    )
    gate.enter()
    try:
        response = await client.send(built, stream=True)
        if response.status_code < 400 and not _not_a_stream(response):
            return response
        try:
            body = await _read_limited(response)
        finally:
            await response.aclose()
    finally:
        gate.active = False
    body = redact(body, _request_secrets(opts, request))  # whole: the excerpt below may cut through a key
    if response.status_code < 400:
        # a proxy's login page, an error object sent with 200, or a server that ignored ``stream``
        text = error_text_from_body(None, body)
        kind = _content_type(response)
        message = f"the provider answered {response.status_code} with {kind} instead of an event stream: {text}"
        found = classify_error(message, None, response.headers, body)
        raise StreamFailure(found.kind, message, found.retry_after, response.status_code)
    message = error_text_from_body(response.status_code, body)
    found = classify_error(message, response.status_code, response.headers, body)
    raise StreamFailure(found.kind, message, found.retry_after, response.status_code)


def _content_type(response: httpx.Response) -> str:
    return str(response.headers.get("content-type", "")).split(";", 1)[0].strip().lower()


def _not_a_stream(response: httpx.Response) -> bool:
    """True for a 2xx/3xx answer that is plainly a JSON or HTML document, not SSE (other types are parsed as SSE)."""
    kind = _content_type(response)
    return kind in ("application/json", "text/html") or kind.endswith("+json")


async def _read_limited(response: httpx.Response) -> str:
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size >= _MAX_ERROR_BODY:
            break
    return b"".join(parts).decode("utf-8", "replace")


def _request_url(exc: BaseException) -> str:
    """Where the failed request went: scheme, host, port and path only (a query may carry a key)."""
    try:
        url = exc.request.url  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # httpx raises RuntimeError when no request is attached
        return "the provider"
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url.host}{port}{url.path}"


def _request_url_of(request: Request) -> str:
    """``request.url`` without its query (which may carry a key)."""
    return request.url.split("?", 1)[0]


def _connection_cause(exc: BaseException) -> ConnectionError | None:
    """The refused/reset/aborted connection behind a connect error, if one is chained.

    httpx words every failed connect "All connection attempts failed" and asyncio a refusal
    "Connect call failed (host, port)"; the chained ``ConnectionError``'s errno says which.
    (TLS and name-resolution failures are other ``OSError``s and keep httpx's own words.)
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionError) and cause.errno:
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def _failure_from_exception(exc: BaseException) -> StreamFailure:
    """Name what went wrong with the connection: a slow server (``timeout``) is not a broken one (``network``)."""
    import httpx

    where = _request_url(exc)
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return StreamFailure("timeout", f"request to {where} timed out ({type(exc).__name__}): {exc}".rstrip(": "))
    if isinstance(exc, httpx.ConnectError):
        cause = _connection_cause(exc)
        reason = os.strerror(cause.errno).lower() if cause is not None and cause.errno else detail
        refused = isinstance(cause, ConnectionRefusedError)
        hint = "; is the server running?" if refused and is_local_url(where) else ""
        return StreamFailure("network", f"cannot connect to {where}: {reason}{hint}")
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return StreamFailure("network", f"the connection to {where} broke before the response finished: {detail}")
    if isinstance(exc, httpx.HTTPError):
        return failure_from_text(f"HTTP error: {detail}")
    return StreamFailure("unknown", f"{type(exc).__name__}: {exc}")
