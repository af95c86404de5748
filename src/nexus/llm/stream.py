"""The provider-neutral entry points: :func:`stream` and :func:`complete`.

``stream`` picks the implementation registered for ``model.api`` and returns its event
iterator. Provider failures never raise: they end the stream with an ``error`` event
whose message has ``stop_reason="error"`` (or ``"aborted"``), the error text and kind,
and whatever content and usage arrived before. Only bad input raises
(:class:`~nexus.errors.UnknownProviderError` for an unknown API or a provider with no
known base URL), and it raises at the call, before any I/O.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from nexus import telemetry
from nexus.errors import UnknownProviderError
from nexus.llm.events import AssistantMessageEvent, ErrorEvent
from nexus.llm.keys import base_url_missing, known_providers, missing_base_url_message
from nexus.llm.options import StreamFn, StreamOptions
from nexus.llm.registry import resolve_api
from nexus.llm.types import AssistantMessage, Context, Model

_TRUSTED_PREFIX = "nexus.llm.providers."


def stream(
    model: Model, context: Context, options: StreamOptions | None = None
) -> AsyncIterator[AssistantMessageEvent]:
    """Stream one model response as events ending in exactly one ``done`` or ``error``.

    Cancelling the consuming task, or aborting ``options.signal``, ends the stream with
    an ``error`` event of reason ``aborted`` carrying the partial message; the
    ``CancelledError`` is absorbed by the stream (``asyncio.current_task().cancelling()``
    still tells you it happened), so the consumer always gets a final message.
    """
    fn = resolve_api(model.api)
    if base_url_missing(model, options):
        raise UnknownProviderError(
            f"unknown provider {model.provider!r} for model {model.id!r}: "
            f"{missing_base_url_message(model.provider)}; "
            f"providers with a known base URL: {', '.join(known_providers())}"
        )
    if getattr(fn, "__module__", "").startswith(_TRUSTED_PREFIX):
        events = fn(model, context, options)
    else:
        events = _guarded(fn, model, context, options)
    if telemetry.observing():  # off: the provider's iterator as it is, nothing added per event
        from nexus.llm._observed import observed

        return observed(events, model, context, options)
    return events


async def complete(model: Model, context: Context, options: StreamOptions | None = None) -> AssistantMessage:
    """Run :func:`stream` to the end and return the final message (``stop_reason`` tells how it ended)."""
    events = stream(model, context, options)
    try:
        async for event in events:
            if event.type == "done":
                return event.message
            if event.type == "error":
                return event.error
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    return _broken(model, "the stream ended without a done or error event")  # pragma: no cover - guarded


async def _guarded(
    fn: StreamFn, model: Model, context: Context, options: StreamOptions | None
) -> AsyncIterator[AssistantMessageEvent]:
    """Hold a user-registered stream function to the contract: never raise, one terminal event.

    Its error text is redacted like the built-in providers' (:mod:`nexus.llm.redact`).
    """
    last: AssistantMessage | None = None
    inner = fn(model, context, options)
    from nexus.llm.redact import redact  # kept out of ``import nexus.llm``

    secrets = [options.api_key if options is not None else None]
    try:
        async for event in inner:
            if event.type == "error":
                event.error.error_message = redact(event.error.error_message or "", secrets) or None
            if event.type == "done" or event.type == "error":
                yield event
                return
            last = event.partial
            yield event
    except Exception as exc:  # the contract: a stream never raises
        yield ErrorEvent("error", _broken(model, redact(f"{type(exc).__name__}: {exc}", secrets), last))
        return
    except BaseException as exc:
        import asyncio  # already loaded whenever a stream runs; kept out of ``import nexus.llm``

        if not isinstance(exc, asyncio.CancelledError):
            raise  # GeneratorExit (consumer closed us), KeyboardInterrupt, SystemExit
        # like the built-in providers: a cancelled consumer still gets the partial message, as aborted
        yield ErrorEvent("aborted", _cancelled(model, options, last))
        return
    finally:
        close = getattr(inner, "aclose", None)
        if close is not None:
            await close()
    yield ErrorEvent("error", _broken(model, "the stream ended without a done or error event", last))


async def aclose_http_client() -> None:
    """Close the running event loop's shared HTTP client (before closing a loop you created yourself).

    Providers keep one client per event loop, with its connections kept alive between
    calls; ``asyncio.run`` users need not call this.
    """
    from nexus.llm._http import aclose_client

    await aclose_client()


def _cancelled(model: Model, options: StreamOptions | None, partial: AssistantMessage | None) -> AssistantMessage:
    message = partial or AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    signal = options.signal if options is not None else None
    message.stop_reason = "aborted"
    message.error_message = signal.reason if signal is not None and signal.reason is not None else "cancelled"
    return message


def _broken(model: Model, text: str, partial: AssistantMessage | None = None) -> AssistantMessage:
    message = partial or AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    message.stop_reason = "error"
    message.error_kind = "unknown"
    message.error_message = text
    return message
