"""bench/embeddings_server.py speaks OpenAI's embeddings wire format: OpenAIEmbedder reads it as the model itself.

The server runs as a real process on 127.0.0.1 with the default embedder (wordllama) behind it, so the
vectors that come over HTTP can be compared with the ones the library makes in this process.
"""

from __future__ import annotations

import base64
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from nexus.routing import OpenAIEmbedder, WordLlamaEmbedder

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "embeddings_server.py"), "--wordllama", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on "), (line, proc.stderr.read() if proc.poll() is not None else "")
        yield line.split()[2]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_openai_embedder_reads_the_servers_vectors_as_the_model_makes_them(server: str) -> None:
    texts = ["add the retry test", "the login rate limiter should answer 429", "x" * 9000]
    remote = OpenAIEmbedder(server, "any-name", api_key="").embed(texts)
    local = WordLlamaEmbedder().embed(texts)
    assert remote.shape == local.shape == (3, 256)
    assert float(np.abs(remote - local).max()) < 1e-6


def test_base64_vectors_decode_to_the_float_ones(server: str) -> None:
    url = server + "/embeddings"
    floats = httpx.post(url, json={"model": "m", "input": "fork from here"}).json()
    packed = httpx.post(url, json={"model": "m", "input": "fork from here", "encoding_format": "base64"}).json()
    raw = base64.b64decode(packed["data"][0]["embedding"])
    decoded = struct.unpack(f"<{len(raw) // 4}f", raw)
    assert floats["object"] == "list" and floats["data"][0]["index"] == 0
    assert floats["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
    assert np.allclose(decoded, floats["data"][0]["embedding"], atol=1e-7)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"not json", "the body is not JSON"),
        (b'{"model": "m"}', "needs 'input'"),
        (b'{"input": []}', "non-empty"),
        (b'{"input": [[1, 2, 3]]}', "token ids are not served"),
        (b'{"input": "a", "encoding_format": "int8"}', "'encoding_format' must be"),
    ],
)
def test_bad_requests_get_an_openai_error_naming_what_is_wrong(server: str, body: bytes, says: str) -> None:
    response = httpx.post(server + "/embeddings", content=body)
    assert response.status_code == 400
    assert says in response.json()["error"]["message"]
    assert httpx.post(server + "/embeddings", json={"input": "still serving"}).status_code == 200


def test_a_body_too_big_or_a_length_that_is_no_number_is_refused(server: str) -> None:
    assert httpx.post(server + "/embeddings", content=b"x" * (8 * 1024 * 1024 + 1)).status_code == 413
    port = int(server.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:  # httpx will not send a false length
        raw.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{}")
        chunks = []  # headers and body come in separate writes: read until the server closes
        while chunk := raw.recv(65536):
            chunks.append(chunk)
        answer = b"".join(chunks).decode()
    assert answer.startswith("HTTP/1.1 400") and "Content-Length must be a byte count" in answer
    assert httpx.post(server + "/embeddings", json={"input": "still serving"}).status_code == 200


def test_unknown_paths_are_404_and_the_model_is_listed(server: str) -> None:
    assert httpx.post(server + "/completions", json={}).status_code == 404
    assert httpx.get(server + "/models").json()["data"][0]["id"] == "wordllama-l2_supercat-256"
