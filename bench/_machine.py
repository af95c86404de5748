"""What every benchmark prints with its result: when, on which CPU, under what load.

A number from this shared VM means little without the CPU it ran on and how busy the
machine was, so every script in ``bench/`` prints :func:`header` before its tables and
:func:`load_line` after them. A reader can then tell drift (another CPU, a busy machine)
from a regression. Standard library only: the scripts run in any venv.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys


def cpu_model() -> str:
    """``lscpu``'s "Model name" (falls back to /proc/cpuinfo, then to the platform string)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, check=False).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Model name":
            return value.strip()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def loadavg() -> str:
    """The 1/5/15-minute load averages, as ``/proc/loadavg`` gives them."""
    try:
        with open("/proc/loadavg", encoding="utf-8") as f:
            return " / ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def header(title: str) -> str:
    """The first lines of a result: what ran, when, where, and the load at the start."""
    cores = os.cpu_count() or 0
    python = sys.version.split()[0]
    return (
        f"# {title}\n"
        f"date: {now()}\n"
        f"cpu: {cpu_model()} ({cores} cores), python {python}\n"
        f"load at start (1/5/15 min): {loadavg()}"
    )


def load_line() -> str:
    """The last line of a result: the load at the end and the time."""
    return f"load at end (1/5/15 min): {loadavg()}  ({now()})"


__all__ = ["cpu_model", "header", "load_line", "loadavg", "now"]
