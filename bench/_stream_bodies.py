"""The loopback side of ``bench_stream.py``: pre-built SSE bodies of N tokens and a server that sends one whole.

The body is written in one ``sendall`` so the client, not the server, is what a row measures.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

TOKEN = "tok "


def build_body(n: int) -> bytes:
    """The whole SSE body: role chunk, n content chunks, finish chunk, usage chunk, [DONE]."""
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "bench-model"}

    def event(choices: list[object], **extra: object) -> bytes:
        return b"data: " + json.dumps({**head, "choices": choices, **extra}).encode() + b"\n\n"

    parts = [event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
    token = event([{"index": 0, "delta": {"content": TOKEN}, "finish_reason": None}])
    parts.extend([token] * n)
    parts.append(event([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    usage = {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n}
    parts.append(event([], usage=usage))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def build_anthropic_body(n: int) -> bytes:
    """The same response in Anthropic Messages SSE (message_start … content_block_delta x n … message_stop)."""

    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    message = {"id": "msg_bench", "type": "message", "role": "assistant", "content": [], "model": "bench-model"}
    parts = [event("message_start", {"type": "message_start", "message": {**message, "usage": usage}})]
    block = {"type": "text", "text": ""}
    parts.append(event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}))
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": TOKEN}}
    parts.extend([event("content_block_delta", delta)] * n)
    parts.append(event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    stop = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n}}
    parts.append(event("message_delta", stop))
    parts.append(event("message_stop", {"type": "message_stop"}))
    return b"".join(parts)


def serve(body: bytes) -> int:
    """Start a loopback server answering every request with ``body`` in one sendall; return its port."""
    blob = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def answer(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                more = conn.recv(65536)
                if not more:
                    return
                data += more
            head, _, rest = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                key, _, value = line.partition(b":")
                if key.strip().lower() == b"content-length":
                    length = int(value)
            while len(rest) < length:
                more = conn.recv(65536)
                if not more:
                    break
                rest += more
            conn.sendall(blob)
            conn.shutdown(socket.SHUT_WR)
            conn.settimeout(5)
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                pass

    def loop() -> None:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return int(srv.getsockname()[1])
