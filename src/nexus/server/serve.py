"""``nexus serve``'s process: the broker and the HTTP API in one asyncio loop (uvicorn run programmatically).

Start: take the broker lock (one draining process per ``$NEXUS_HOME``), start the broker (it
reloads the registry and the pending queue items and drains them), listen, then announce the
address in ``server.json`` with a token made for this start (accepted beside ``[server] tokens``
whenever tokens are in use, so the CLI needs no ``NEXUS_TOKEN`` of its own; with ``require_token``
it is the one token of a loopback server). Stop (SIGTERM or SIGINT): the broker is closed first — active runs
are aborted and written ``aborted``, queued messages stay durable for the next start — so that
requests waiting on a run finish (a chat completion is told the server stopped: its turn aborted, or
its message still queued); then uvicorn closes its connections, ``server.json`` is removed and the
lock released. A second SIGINT forces uvicorn to stop at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import secrets
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import uvicorn

from nexus.server._http_timeouts import TimedHttpProtocol
from nexus.server.discovery import remove_server_file, write_server_file

if TYPE_CHECKING:
    from nexus.broker import AgentBroker
    from nexus.config import NexusConfig, ServerConfig
    from nexus.ledger import Ledger
    from nexus.llm import StreamFn
    from nexus.server._event_hub import EventHub
    from nexus.server._event_relay import EventRelay
    from nexus.server._state import ServerState

GRACEFUL_S = 5
"""How long open connections (streams) get to finish after the runs were aborted."""


class NexusUvicorn(uvicorn.Server):
    """uvicorn without its own signal handling (the caller closes the broker first), with a ``ready`` event."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: Any = None) -> None:
        try:
            await super().startup(sockets)
        except SystemExit:  # uvicorn logged why (e.g. the port is taken) and exits; we stop instead
            self.should_exit = True
            return
        if self.started:
            self.ready.set()


async def serve_http(
    config: NexusConfig,
    ledger: Ledger,
    settings: ServerConfig,
    *,
    stream_fn: StreamFn | None = None,
    log_requests: bool = True,
    metrics_tokens: Sequence[str] = (),
) -> int:
    """Run until SIGTERM/SIGINT; the caller holds the broker lock. Returns the exit code.

    WAL checkpoints run on a thread of their own meanwhile (see ``nexus.ledger._checkpoint``).
    The tokens are registered with the redactor: no error text of a run ever repeats one.
    ``log_requests``: one line per request on stderr (``nexus.server._access_log``); a JSON object
    through the process's log handler with ``--log-format json``.
    With ``[telemetry] metrics`` (the default) ``/metrics`` answers, ``metrics_tokens`` (resolved)
    are accepted there, and the event loop's lag is measured meanwhile.
    """
    from nexus.ledger import background_checkpoints
    from nexus.llm import add_secrets
    from nexus.server._access_log import log

    add_secrets(settings.tokens)
    handler = _access_lines(log_requests)
    try:
        with background_checkpoints(ledger.database), _measured_loop(config):
            return await _serve(config, ledger, settings, stream_fn=stream_fn, metrics_tokens=metrics_tokens)
    finally:
        if handler is not None:
            log.removeHandler(handler)
        log.setLevel(logging.NOTSET)


def _access_lines(wanted: bool) -> logging.Handler | None:
    """Where the request lines go: with ``--log-format json`` the process's log handler (JSON objects
    like every other line), else a handler of their own on stderr (``nexus serve: GET / 200 1.2 ms``;
    returned, to remove at the end)."""
    from nexus.server._access_log import log, log_requests_to_stderr
    from nexus.telemetry import json_logs

    if not wanted:
        log.setLevel(logging.WARNING)  # --quiet: the middleware formats nothing
        return None
    if json_logs():
        log.setLevel(logging.INFO)
        log.propagate = True
        return None
    handler: logging.Handler = log_requests_to_stderr()
    return handler


@contextlib.contextmanager
def _measured_loop(config: NexusConfig) -> Iterator[None]:
    """Metrics on (as ``[telemetry] metrics`` says) and the loop-lag watcher running, for the block."""
    if not config.telemetry.metrics:
        yield
        return
    from nexus import telemetry
    from nexus.telemetry import watch_loop_lag

    try:
        recorder = telemetry.enable_metrics()
    except ImportError as exc:  # a server extra installed before metrics were part of it
        print(f"nexus serve: /metrics is off: {exc}; pip install prometheus-client", file=sys.stderr, flush=True)
        yield
        return
    watcher = asyncio.get_running_loop().create_task(watch_loop_lag(recorder), name="nexus:loop-lag")
    try:
        yield
    finally:
        watcher.cancel()


def settle_heap() -> None:
    """Freeze what startup allocated (the app, its schemas, the imported modules) out of the collector's sight.

    CPython's full collections walk every tracked object; in a server that is mostly the
    startup heap, which lives as long as the process. Each full collection stalled every
    request for 40-125 ms in ``bench/bench_server.py``; ``gc.freeze`` moves that heap to a
    generation the collector never scans, so later collections only walk what requests and
    runs allocated since.
    """
    gc.collect()
    gc.freeze()


async def _serve(
    config: NexusConfig,
    ledger: Ledger,
    settings: ServerConfig,
    *,
    stream_fn: StreamFn | None = None,
    metrics_tokens: Sequence[str] = (),
) -> int:
    from nexus.broker import build_host, start_host
    from nexus.server._state import ServerState
    from nexus.server.app import create_app

    # the broker, the deliverer of reply targets (inbound chats', `deliver` messages', recorded per turn) and
    # the inbound chat monitors (docs/adapters.md)
    host = build_host(config, ledger, stream_fn=stream_fn, monitors=True)
    loop = asyncio.get_running_loop()
    server: NexusUvicorn | None = None
    state: ServerState | None = None
    stopping: list[asyncio.Task[None]] = []
    hubs: list[EventHub] = []

    def on_signal(sig: int) -> None:
        if server is not None:
            server.force_exit = server.should_exit and sig == signal.SIGINT
            server.should_exit = True
        if not stopping:
            print("nexus serve: stopping (active runs are aborted and kept)", file=sys.stderr, flush=True)
            if state is not None:  # chat completions whose turns end aborted now answer "shutting down"
                state.stopping.set()
            ledger.stopping()  # an unreachable PostgreSQL holds the stop a bounded time, not a retry per write
            stopping.append(loop.create_task(_stop_runs_then_streams(host.broker, hubs, state)))

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        state = ServerState(ledger, _store(ledger), broker=host.broker, runtime=host.runtime, deliverer=host.deliverer)
        start_token = _start_token(settings)
        tokens = [*settings.tokens, start_token] if start_token else []
        app = create_app(state, settings.model_copy(update={"tokens": tokens}), metrics_tokens=metrics_tokens)
        hubs += await _live_runs(state, host, ledger, settings)
        await start_host(config, host)
        if config.routing.index:  # every written turn indexed for smart routing, on a worker thread
            from nexus.broker import index_after_runs

            await index_after_runs(host.runtime, host.broker.routing)
        server = _uvicorn(app, settings)
        if stopping:  # a signal came while the broker started
            return 0
        settle_heap()
        return await _listen(config, server, settings, start_token)
    finally:
        await _close(host, state)
        remove_server_file(config)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def _close(host: Any, state: ServerState | None) -> None:
    """Stop every run, tell the chat completions still waiting for one, close the services, then the host."""
    await _stop_runs(host.broker)
    if state is not None:
        state.stopping.set()
        state.runs_stopped.set()  # chat completions still waiting for a run are answered now
    if state is not None and state.relay is not None:
        await state.relay.close()  # what the runs' last events left in its buffer goes to the log
    if state is not None and state.mcp is not None:
        await state.mcp.close()  # the MCP clients' sessions end
    await host.close()  # runs are aborted: monitors stop, deliveries end and are recorded, adapters stop


def _uvicorn(app: Any, settings: ServerConfig) -> NexusUvicorn:
    """The HTTP server: our lifespan and logs (uvicorn's access log is off), bounded header and body times."""
    protocol = TimedHttpProtocol.with_timeouts(settings.header_timeout_seconds, settings.body_timeout_seconds)
    return NexusUvicorn(
        uvicorn.Config(
            app, host=settings.host, port=settings.port, lifespan="off", log_level="warning",
            access_log=False, timeout_graceful_shutdown=GRACEFUL_S, http=protocol, **_uvicorn_logs(),
        )
    )  # fmt: skip


def _uvicorn_logs() -> dict[str, Any]:
    """uvicorn logs through our handler when ``nexus serve`` installed one (else its own, as before)."""
    from nexus.telemetry import logs_configured

    return {"log_config": None} if logs_configured() else {}


def _start_token(settings: ServerConfig) -> str | None:
    """The token of this start (in ``server.json``), when tokens are in use; registered with the redactor."""
    if not (settings.tokens or settings.require_token):
        return None
    from nexus.llm import add_secrets

    token = secrets.token_urlsafe(32)
    add_secrets([token])  # like the configured tokens: no error text ever repeats it
    return token


async def _listen(config: NexusConfig, server: NexusUvicorn, settings: ServerConfig, token: str | None) -> int:
    task = asyncio.get_running_loop().create_task(server.serve())
    ready = asyncio.get_running_loop().create_task(server.ready.wait())
    await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if not server.started:
        await task
        print(
            f"nexus: error: cannot listen on {settings.host}:{settings.port} (see the message above)", file=sys.stderr
        )
        return 1
    port = _bound_port(server, settings.port)
    write_server_file(config, settings.host, port, token)
    for line in start_lines(f"http://{settings.host}:{port}", token, configured_tokens=bool(settings.tokens)):
        print(f"nexus serve: {line}", file=sys.stderr, flush=True)
    await task
    return 0


def start_lines(url: str, token: str | None, *, configured_tokens: bool) -> list[str]:
    """What ``nexus serve`` prints once it listens: where the web UI and the API docs are, and how to get in.

    With only ``require_token`` the token is this start's (in ``server.json``, 0600): the UI's address
    carries it after ``#`` (never sent to the server, removed by the page); with ``[server] tokens`` the
    page asks for one of them. ``/docs`` needs no token to open; its Authorize button takes one.
    """
    if token is None:
        return [f"listening on {url}", f"web UI at {url}/  ·  API docs at {url}/docs"]
    if configured_tokens:
        ui = f"web UI at {url}/ (it asks for one of [server] tokens)"
    else:
        ui = f"web UI at {url}/#token={token}"
    return [f"listening on {url}", ui, f"API docs at {url}/docs (click Authorize and paste the token to try calls)"]


async def _stop_runs(broker: AgentBroker) -> None:
    """Abort every run (the broker's, chat completions' in other sessions among them); their turns are written."""
    await broker.close()


async def _live_runs(state: ServerState, host: Any, ledger: Ledger, settings: ServerConfig) -> list[EventHub]:
    """Every run, live on its session's event stream (on PostgreSQL every process's runs, on every process)."""
    hub = state.events
    if hub is None:
        return []
    from nexus.server._live import LiveRuns

    state.relay = await _start_relay(ledger, hub, settings)
    live = LiveRuns(state.relay or hub)
    host.runtime.on_start = live.follow
    host.broker.on_takeover(live.taken_over)  # a run whose process died ends its streams with a stream_error
    return [hub]


async def _start_relay(ledger: Ledger, hub: EventHub, settings: ServerConfig) -> EventRelay | None:
    """The relay of run events through the ledger's shared log (PostgreSQL), started; ``None`` on SQLite.

    ``[server] events_log_flush_ms`` and ``events_log_max_rows`` set its batch and the log's bound."""
    events = ledger.run_events
    if events is None:
        return None
    from nexus.server._event_relay import EventRelay

    relay = EventRelay(hub, events, keep_rows=settings.events_log_max_rows, flush_s=settings.events_log_flush_ms / 1000)
    await relay.start()
    return relay


async def _stop_runs_then_streams(broker: AgentBroker, hubs: list[EventHub], state: ServerState | None) -> None:
    """Abort the runs, then end the open SSE streams (else uvicorn's graceful stop would wait for them).

    In this order, so a client watching a run gets its final event (``stream_error``) before
    its stream ends, instead of a reply left "still streaming" by a server that is gone.
    """
    try:
        await _stop_runs(broker)
        if state is not None:
            state.runs_stopped.set()  # no run takes a message now: completions waiting for one are answered
        if state is not None and state.relay is not None:
            await state.relay.close()  # the runs' last events reach the log, and this hub's readers
    finally:
        for hub in hubs:
            hub.close()


def _bound_port(server: NexusUvicorn, default: int) -> int:
    for listener in server.servers:
        for sock in listener.sockets:
            return int(sock.getsockname()[1])
    return default


def _store(ledger: Ledger) -> Any:
    from nexus.ledger import BrokerStore

    return BrokerStore(ledger.database)
