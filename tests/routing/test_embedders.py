"""Embedders: the offline default, an OpenAI-compatible /v1/embeddings over real loopback HTTP, and a failing one."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from nexus.ledger import Ledger
from nexus.routing import EmbedderError, OpenAIEmbedder, Router, RouteSettings, WordLlamaEmbedder

from ._ledgers import NOW_MS, corpus


class _FakeEmbeddings:
    """``POST /v1/embeddings`` on 127.0.0.1: a bag-of-words hashing embedding, or the failure it is told."""

    def __init__(self) -> None:
        self.failing: int | None = None  # an HTTP status to answer with
        self.requests: list[dict[str, object]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if fake.failing is not None:
                    self.send_response(fake.failing)
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "model not loaded"}}')
                    return
                data = [
                    {"object": "embedding", "index": i, "embedding": _vector(t)} for i, t in enumerate(body["input"])
                ]
                payload = json.dumps({"object": "list", "data": data[::-1], "model": body["model"]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _vector(text: str) -> list[float]:
    out = [0.0] * 64
    for word in text.lower().split():
        out[sum(map(ord, word)) % 64] += 1.0
    return out


@pytest.fixture
def fake() -> Iterator[_FakeEmbeddings]:
    server = _FakeEmbeddings()
    yield server
    server.close()


def test_wordllama_runs_offline_from_its_wheel() -> None:
    embedder = WordLlamaEmbedder()
    vectors = embedder.embed(["fix the login rate limiter", "repair the sign-in throttle", "bake a cake"])
    assert vectors.shape == (3, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])


def test_openai_embeddings_are_read_in_index_order_and_normalized(fake: _FakeEmbeddings) -> None:
    embedder = OpenAIEmbedder(fake.base_url, "nomic-embed", api_key="k-1")
    vectors = embedder.embed(["alpha beta", "gamma"])
    assert vectors.shape == (2, 64) and embedder.dim == 64
    expected = np.asarray(_vector("alpha beta"), np.float32)
    assert np.allclose(vectors[0], expected / np.linalg.norm(expected))
    assert fake.requests[0]["path"] == "/v1/embeddings" and fake.requests[0]["auth"] == "Bearer k-1"
    assert fake.requests[0]["body"] == {"model": "nomic-embed", "input": ["alpha beta", "gamma"]}
    embedder.close()


def test_many_texts_go_in_requests_of_a_bounded_size_and_come_back_in_order(fake: _FakeEmbeddings) -> None:
    """The indexer embeds 64 checkpoints at once; one request of 64 to a local CPU model outlasted the timeout."""
    texts = [f"word{i} shared" for i in range(40)]
    vectors = OpenAIEmbedder(fake.base_url, "all-MiniLM-L6-v2").embed(texts)
    assert [len(r["body"]["input"]) for r in fake.requests] == [16, 16, 8]  # type: ignore[index]
    expected = np.asarray([_vector(t) for t in texts], np.float32)
    assert vectors.shape == (40, 64)
    assert np.allclose(vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True))


def test_an_embeddings_endpoint_that_fails_is_an_embedder_error(fake: _FakeEmbeddings) -> None:
    fake.failing = 500
    embedder = OpenAIEmbedder(fake.base_url, "nomic-embed")
    with pytest.raises(EmbedderError, match="answered 500"):
        embedder.embed(["x"])
    with pytest.raises(EmbedderError, match="needs embedding_model"):
        OpenAIEmbedder(fake.base_url, " ")


def test_routing_with_the_openai_provider(fake: _FakeEmbeddings, tmp_path: Path) -> None:
    settings = RouteSettings(embedder="openai", embedding_base_url=fake.base_url, embedding_model="m")
    with Ledger.open(tmp_path / "agents.db") as ledger:
        ids = corpus(ledger, tmp_path / "ws")
        with Router(ledger, settings) as router:
            result = router.route("shrink the docker image of the API further", now_ms=NOW_MS)
    assert result.checkpoint is not None and result.checkpoint.turn_id == ids["docker"]
    assert result.notes == []


def test_a_failing_embedder_falls_back_to_lexical_and_says_so_once(
    fake: _FakeEmbeddings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = RouteSettings(embedder="openai", embedding_base_url=fake.base_url, embedding_model="m")
    with Ledger.open(tmp_path / "agents.db") as ledger:
        ids = corpus(ledger, tmp_path / "ws")
        with Router(ledger, settings) as router:
            router.catch_up()
            fake.failing = 503
            with caplog.at_level(logging.WARNING, logger="nexus.routing"):
                first = router.route("shrink the docker image of the API further", now_ms=NOW_MS)
                second = router.route("generate the pdf invoice of a paid order", now_ms=NOW_MS)
            decisions = router.decisions.decisions()
    assert first.checkpoint is not None and first.checkpoint.turn_id == ids["docker"]
    assert second.checkpoint is not None and second.checkpoint.turn_id == ids["invoice"]
    assert any("ranked by lexical search alone" in n for n in first.notes)
    warnings = [r for r in caplog.records if "embedder failed" in r.getMessage()]
    assert len(warnings) == 1
    assert len(decisions) == 2 and all(d.decision in ("existing", "new") for d in decisions)


def test_turns_indexed_while_the_embedder_failed_get_vectors_when_it_works_again(
    fake: _FakeEmbeddings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nexus.routing._indexer as indexer

    monkeypatch.setattr(indexer, "RETRY_EMBEDDER_S", 0.0)
    settings = RouteSettings(embedder="openai", embedding_base_url=fake.base_url, embedding_model="m")
    with Ledger.open(tmp_path / "agents.db") as ledger:
        corpus(ledger, tmp_path / "ws")
        with Router(ledger, settings) as router:  # the dimension is learnt from a first answer
            fake.failing = 500
            router.catch_up()
            assert router.index.with_vectors == 0 and len(router.index) == 4
            fake.failing = None
            router.catch_up()
            assert router.index.with_vectors == 4
            assert router.store.without_vector(router.guard.name, 10) == []


def test_loading_wordllama_leaves_the_root_logger_as_it_was() -> None:
    """``import wordllama`` calls ``logging.basicConfig(level=INFO)``: from then on ``nexus send --route`` printed
    every httpx request URL and each run's INFO line (a stranger's trial). In a fresh process, as the CLI is."""
    script = (
        "import logging\n"
        "from nexus.routing import WordLlamaEmbedder\n"
        "WordLlamaEmbedder().embed(['load the model'])\n"
        "root = logging.getLogger()\n"
        "print(len(root.handlers), root.level)\n"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", str(logging.WARNING)], done.stdout
