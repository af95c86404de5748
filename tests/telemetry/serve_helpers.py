"""A real ``nexus serve`` process for the telemetry tests (the server tests' own helper), and reading its
Prometheus text."""

from __future__ import annotations

import signal
import subprocess
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from server.serve_proc import serve_env as nexus_env
from server.serve_proc import serving

__all__ = ["get", "nexus_env", "samples", "serving", "stop", "total", "value", "wait_for"]


def stop(process: subprocess.Popen[str]) -> str:
    """SIGTERM, wait, return its stderr."""
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    return stderr


def wait_for(check: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text, parsed by ``prometheus_client``'s own parser, by (name, labels)."""
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` (KeyError naming the near misses when absent)."""
    key = (name, tuple(sorted(labels.items())))
    if key not in found:
        near = sorted(str(k) for k in found if k[0] == name)
        raise KeyError(f"{key} not in the metrics; samples of {name}: {near}")
    return found[key]


def total(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, key), v in found.items() if n == name and wanted <= set(key))


def get(url: str, token: str | None = None, **headers: str) -> httpx.Response:
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return httpx.get(url, headers=headers, timeout=10)
