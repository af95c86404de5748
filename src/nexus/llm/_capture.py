"""The shared HTTP client, recording each provider exchange while capture is on.

See :mod:`nexus.llm.capture` for the file format and the redaction rules. Capture is
decided per request (``$NEXUS_CAPTURE_DIR`` can be set at any time); when it is off,
``send`` is the plain httpx one and nothing is added to the per-chunk path. When it is
on, the response's byte stream is wrapped: each chunk is kept, and the file is written
when the stream is closed (whole, cut, or abandoned by the caller).
"""

from __future__ import annotations

import itertools
import logging
import os
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from nexus.llm.capture import CaptureRecord, capture_dir, redact_headers, scrub_json
from nexus.llm.redact import REDACTED, known_secrets, scrub, secret_name

_log = logging.getLogger("nexus.llm")
_sequence = itertools.count(1)
_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


class CapturingClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` whose :meth:`send` records the exchange when capture is on."""

    async def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        directory = capture_dir()
        if directory is None:
            return await super().send(request, **kwargs)
        recorder = _Recorder(directory, request)
        try:
            response = await super().send(request, **kwargs)
        except Exception as exc:  # no response at all: the capture says why
            recorder.error = f"{type(exc).__name__}: {exc}"
            recorder.save()
            raise
        recorder.response = response
        try:
            recorder.parts.append(response.content)  # already read (``stream=False``)
            recorder.decoded = True
            recorder.save()
        except httpx.ResponseNotRead:
            response.stream = _TeeStream(response.stream, recorder)
        return response


class _TeeStream(httpx.AsyncByteStream):
    """Passes the raw body through, keeping a copy; writes the capture on close."""

    def __init__(self, inner: httpx.AsyncByteStream | Any, recorder: _Recorder) -> None:
        self._inner = inner
        self._recorder = recorder

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parts = self._recorder.parts
        try:
            async for chunk in self._inner:
                parts.append(chunk)
                yield chunk
        except Exception as exc:
            self._recorder.error = f"{type(exc).__name__}: {exc or 'connection lost'}"
            raise

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._recorder.save()


class _Recorder:
    """What one exchange collects until it is written."""

    def __init__(self, directory: Path, request: httpx.Request) -> None:
        self.directory = directory
        self.request = request
        self.response: httpx.Response | None = None
        self.parts: list[bytes] = []
        self.decoded = False
        self.error: str | None = None
        self.started = time.time()
        self.saved = False

    def save(self) -> None:
        """Write the capture once; a failure to write is logged, never raised into the call."""
        if self.saved:
            return
        self.saved = True
        try:
            data = _record(self).to_bytes()
            self.directory.mkdir(parents=True, exist_ok=True)
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self.started))
            name = f"{stamp}-{os.getpid()}-{next(_sequence):04d}.capture"
            temporary = self.directory / f".{name}.tmp"
            temporary.touch(mode=0o600)  # it holds the user's prompts: readable by its owner only
            temporary.write_bytes(data)
            os.replace(temporary, self.directory / name)
        except OSError as exc:
            _log.warning("nexus: cannot write the capture to %s: %s", self.directory, exc)


def _record(recorder: _Recorder) -> CaptureRecord:
    """The redacted record; the secrets found in headers are cut out of everything else."""
    request = recorder.request
    secrets = known_secrets()
    request_headers = redact_headers(request.headers.multi_items(), secrets)
    url = _redacted_url(request.url, secrets)
    response = recorder.response
    body = b"".join(recorder.parts)
    headers: dict[str, str] = {}
    if response is not None:
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if not recorder.decoded and encoding:
            body, encoding = _decoded(body, encoding)
        items = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _HOP_HEADERS]
        if not encoding or recorder.decoded:
            items = [(k, v) for k, v in items if k.lower() != "content-encoding"]
        headers = redact_headers(items, secrets, response=True)
    record = CaptureRecord(
        method=request.method,
        url=url,
        status=response.status_code if response is not None else None,
        response_headers={k: scrub(v.encode(), secrets).decode() for k, v in headers.items()},
        request_headers=request_headers,
        request=scrub_json(_request_body(request), secrets),
        body=scrub(body, secrets),
        error=scrub((recorder.error or "").encode(), secrets).decode() or None,
        captured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(recorder.started)),
    )
    return record


def _redacted_url(url: httpx.URL, secrets: set[str]) -> str:
    """Scheme, host, port, path, and the query with credential parameters (``?key=``) redacted."""
    params: list[tuple[str, str]] = []
    for name, value in url.params.multi_items():
        if secret_name(name):
            secrets.add(value)
            value = REDACTED
        params.append((name, value))
    port = f":{url.port}" if url.port else ""
    query = f"?{urlencode(params)}" if params else ""
    return f"{url.scheme}://{url.host}{port}{url.path}{query}"


def _request_body(request: httpx.Request) -> Any:
    """The request body as JSON when it is JSON, else as text (``None`` when empty)."""
    import json

    try:
        content = request.content
    except httpx.RequestNotRead:
        return None
    if not content:
        return None
    text = content.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _decoded(body: bytes, encoding: str) -> tuple[bytes, str]:
    """Undo gzip/deflate so the capture is readable; other encodings stay as sent (and keep their header)."""
    if encoding not in ("gzip", "x-gzip", "deflate"):
        return body, encoding
    for wbits in (zlib.MAX_WBITS | 32, -zlib.MAX_WBITS):  # gzip or zlib header, then raw deflate
        try:
            return zlib.decompressobj(wbits).decompress(body), ""
        except zlib.error:
            continue
    return body, encoding
