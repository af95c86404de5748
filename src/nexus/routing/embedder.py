"""Embedders: text -> unit vectors, behind one small protocol.

The default, :class:`WordLlamaEmbedder`, runs offline: the ``wordllama`` wheel carries its weights
(``l2_supercat``, 256 dimensions, ~16 MB) and its tokenizer, so nothing is downloaded at run time. (Its
``WordLlama.load()`` looks for the tokenizer in a folder the wheel does not have and then tries the
network; we point it at the wheel's own folder and forbid downloads.) :class:`OpenAIEmbedder` talks to
any OpenAI-compatible ``/v1/embeddings`` endpoint (llama.cpp's server, Ollama, OpenAI). numpy and
wordllama are imported on first use, never by ``import nexus``.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from nexus.routing.errors import EmbedderError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

DEFAULT_DIM = 256
MAX_EMBED_CHARS = 8000
TEXTS_PER_REQUEST = 16
"""Texts per ``/v1/embeddings`` request. The indexer embeds 64 checkpoints at a time; a local CPU model
(all-MiniLM-L6-v2 under sentence-transformers on a busy 2-core machine) took 21-29 s for 64, past the
10 s timeout, and every catch-up then fell back to lexical search. 16 keeps a request near a quarter of that."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of ``dim`` dimensions, one row per text."""

    @property
    def name(self) -> str:
        """Names the model and dimension: vectors made by different embedders are never compared."""
        ...

    @property
    def dim(self) -> int:
        """The vectors' dimension."""
        ...

    def embed(self, texts: list[str]) -> Vectors:
        """A ``(len(texts), dim)`` float32 array of unit vectors; raises :class:`EmbedderError` on failure."""
        ...


def normalize(vectors: Any) -> Vectors:
    """Rows scaled to unit length (a zero row stays zero), as float32."""
    import numpy as np

    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        array = array[None, :]
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: Vectors = (array / norms).astype(np.float32, copy=False)
    return result


class WordLlamaEmbedder:
    """The offline default: WordLlama's static token embeddings (its weights ship in its wheel)."""

    def __init__(self, dim: int = DEFAULT_DIM) -> None:
        self._dim = dim
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"wordllama-l2_supercat-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from pathlib import Path

                    with _RootLoggingKept():
                        import wordllama  # type: ignore[import-untyped]
                        from wordllama import WordLlama
                except ImportError as exc:
                    raise EmbedderError(
                        "the wordllama package is not installed; pip install 'nexus-broker[routing]' "
                        '(or set [routing] embedder = "openai")'
                    ) from exc
                folder = Path(wordllama.__file__).parent
                try:
                    self._model = WordLlama.load(
                        dim=256,
                        trunc_dim=self._dim if self._dim != 256 else None,
                        cache_dir=folder,
                        disable_download=True,
                    )
                except (OSError, ValueError) as exc:
                    raise EmbedderError(f"wordllama could not load its bundled model from {folder}: {exc}") from exc
            return self._model

    def embed(self, texts: list[str]) -> Vectors:
        model = self._load()
        try:
            vectors = model.embed([t[:MAX_EMBED_CHARS] or " " for t in texts], norm=True)
        except Exception as exc:  # the library's own failures, whatever their type
            raise EmbedderError(f"wordllama failed to embed: {exc}") from exc
        return normalize(vectors)


class OpenAIEmbedder:
    """An OpenAI-compatible ``POST {base_url}/embeddings`` (``base_url`` ends in ``/v1``)."""

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None, dim: int = 0, timeout_s: float = 10.0
    ) -> None:
        if not base_url.strip():
            raise EmbedderError(
                '[routing] embedder = "openai" needs embedding_base_url (e.g. http://127.0.0.1:8080/v1)'
            )
        if not model.strip():
            raise EmbedderError('[routing] embedder = "openai" needs embedding_model')
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self._key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._dim = dim
        self._timeout = timeout_s
        self._client: Any = None

    @property
    def name(self) -> str:
        return f"openai:{self._model}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: list[str]) -> Vectors:
        """Sent ``TEXTS_PER_REQUEST`` at a time: each request stays well inside the timeout."""
        import numpy as np

        if len(texts) <= TEXTS_PER_REQUEST:
            return self._embed(texts)
        parts = [self._embed(texts[i : i + TEXTS_PER_REQUEST]) for i in range(0, len(texts), TEXTS_PER_REQUEST)]
        return np.concatenate(parts)

    def _embed(self, texts: list[str]) -> Vectors:
        import httpx

        if self._client is None:
            self._client = httpx.Client(timeout=self._timeout)
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        body = {"model": self._model, "input": [t[:MAX_EMBED_CHARS] or " " for t in texts]}
        try:
            response = self._client.post(self._url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise EmbedderError(f"the embeddings endpoint {self._url} failed: {exc}") from exc
        if response.status_code != 200:
            raise EmbedderError(
                f"the embeddings endpoint {self._url} answered {response.status_code}: {response.text[:200]}"
            )
        return self._parse(response, len(texts))

    def _parse(self, response: Any, count: int) -> Vectors:
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            rows = [item["embedding"] for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedderError(f"the embeddings endpoint {self._url} sent no OpenAI embeddings body") from exc
        if len(rows) != count or not rows or any(len(r) != len(rows[0]) for r in rows):
            raise EmbedderError(f"the embeddings endpoint {self._url} sent {len(rows)} vectors for {count} texts")
        if self._dim and len(rows[0]) != self._dim:
            raise EmbedderError(f"the embeddings endpoint {self._url} sent {len(rows[0])} dimensions, not {self._dim}")
        self._dim = len(rows[0])
        return normalize(rows)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class _RootLoggingKept:
    """Undo what an import does to the root logger: ``import wordllama`` calls ``logging.basicConfig(level=INFO)``,
    and from then on every httpx request URL and each run's INFO line of ``nexus send --route`` went to stderr
    (a stranger's trial). The handlers it added are removed and the root level restored."""

    def __enter__(self) -> None:
        import logging

        root = logging.getLogger()
        self._handlers, self._level = list(root.handlers), root.level

    def __exit__(self, *exc: object) -> None:
        import logging

        root = logging.getLogger()
        for handler in root.handlers[:]:
            if handler not in self._handlers:
                root.removeHandler(handler)
        root.setLevel(self._level)
