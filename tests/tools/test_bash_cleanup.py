"""Nothing a bash call starts outlives it: background jobs, ``setsid`` children, and after a SIGKILLed nexus.

Real processes throughout: the tests read pids the commands write and check ``/proc``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import text, tool_call
from nexus.tools import Workspace, bash_tool
from nexus.tools import _janitor as janitor_mod

from ._helpers import call, text_of

SRC = Path(__file__).resolve().parents[2] / "src"
pytestmark = pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux /proc to watch processes")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _gone(*pids: int, within: float = 10.0) -> bool:
    """Whether all ``pids`` have ended within ``within`` seconds (a guard against hangs, not a timing)."""
    deadline = time.monotonic() + within
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()]


@pytest.mark.parametrize(
    "start",
    [
        "sleep 300 &",  # a background job in the call's process group
        "setsid sleep 300 &",  # a new session: outside the group
        "(setsid sh -c 'sleep 300 & echo $! >> PIDS' &)",  # a double fork into a new session
        "nohup sleep 300 >/dev/null 2>&1 & disown",
        "(set -m; sleep 300 &  echo $! >> PIDS; wait) &",  # job control: a new process group in the session
        "env -i /bin/sleep 300 &",  # environment cleared, but still in the call's session
    ],
)
async def test_processes_started_by_a_call_end_with_it(ws: Workspace, tmp_path: Path, start: str) -> None:
    pidfile = tmp_path / "pids"
    command = start.replace("PIDS", str(pidfile))
    if "PIDS" not in start:
        command += f"\necho $! >> {pidfile}"
    result = await call(bash_tool(ws), command=f"{command}\nsleep 0.2; echo done")
    assert text_of(result) == "done"
    pids = await asyncio.to_thread(_pids, pidfile)
    assert pids
    assert await asyncio.to_thread(_gone, *pids), f"{start!r} outlived the call"


async def test_timeout_ends_a_setsid_child_too(ws: Workspace, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    result = await call(bash_tool(ws, timeout=0.5), command=f"setsid sleep 300 & echo $! > {pidfile}; sleep 300")
    assert result.is_error and text_of(result).endswith("Command timed out after 0.5 seconds")
    assert await asyncio.to_thread(_gone, *await asyncio.to_thread(_pids, pidfile))


async def test_only_the_newest_full_output_files_are_kept(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(janitor_mod, "MAX_SPILL_FILES", 2)
    paths = []
    for _ in range(3):
        result = await call(bash_tool(ws), command="seq 1 30000")
        assert result.details is not None
        paths.append(Path(result.details["full_output_path"]))
    assert paths[0].parent == janitor_mod.janitor().spill_dir
    assert [p.exists() for p in paths] == [False, True, True]


_SPILL_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from nexus.llm.abort import AbortSignal
    from nexus.tools import Workspace, bash_tool

    result = asyncio.run(bash_tool(Workspace(sys.argv[1])).execute("c", {"command": "seq 1 30000"}, AbortSignal(),
                                                                    lambda _r: None))
    print(result.details["full_output_path"])
    """
)


def test_full_output_files_are_removed_when_the_process_exits(ws: Workspace) -> None:
    res = subprocess.run(
        [sys.executable, "-c", _SPILL_CHILD, str(ws.root)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=60,
        check=True,
    )
    spill = Path(res.stdout.strip())
    assert spill.name.endswith(".log") and spill.parent.name.startswith("nexus-bash-")
    assert not spill.exists() and not spill.parent.exists()


_NO_SPACE_CHILD = textwrap.dedent(
    """
    import asyncio, resource, signal, sys
    from nexus.llm.abort import AbortSignal
    from nexus.tools import Workspace, bash_tool

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG, like a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))
    result = asyncio.run(bash_tool(Workspace(sys.argv[1])).execute("c", {"command": "seq 1 30000"}, AbortSignal(),
                                                                    lambda _r: None))
    print(result.is_error, (result.details or {}).get("full_output_path"))
    print(result.content[0].text.rsplit("\\n", 1)[-1])
    """
)


def test_output_that_cannot_be_saved_still_comes_back(ws: Workspace) -> None:
    res = subprocess.run(
        [sys.executable, "-c", _NO_SPACE_CHILD, str(ws.root)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=60,
        check=True,
    )
    status, notice = res.stdout.strip().split("\n")
    assert status == "False None", res.stdout
    assert notice == (
        "[Showing lines 28001-30000 of 30000 (2000 lines limit). Full output not saved: File too large (EFBIG)]"
    ), res.stdout


def _reaper_of(pid: int) -> list[str]:
    """argv of the reaper process started by ``pid`` (empty when none)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().rstrip("\0").split("\0")
            except OSError:
                continue
            if any(a.endswith("_reaper.py") for a in argv):
                return argv
    return []


def test_sigkilled_nexus_leaves_no_process_and_no_output_file(isolated_env: Path, tmp_path: Path) -> None:
    home = isolated_env
    (home / "workspace").mkdir(parents=True)
    pidfile = tmp_path / "pids"
    command = f"seq 1 30000; sleep 300 & echo $! >> {pidfile}; setsid sleep 300 & echo $! $$ >> {pidfile}; sleep 300"
    with FakeProviderServer(tool_call("bash", {"command": command}), text("unreachable")) as server:
        (home / "nexus.toml").write_text(
            'default_model = "fake/fake-model"\n[providers.fake]\napi = "openai-completions"\n'
            f'base_url = "{server.openai_base_url}"\napi_key = "test"\n',
            encoding="utf-8",
        )
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "nexus.cli", "run", "start the servers"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**env, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC)},
        )
        try:
            deadline = time.monotonic() + 60
            while not (pidfile.exists() and len(pidfile.read_text().split()) == 3):
                assert proc.poll() is None and time.monotonic() < deadline, "the bash call did not start"
                time.sleep(0.05)
            time.sleep(0.2)  # the 30,000 lines are read (and spilled to a file)
            reaper = _reaper_of(proc.pid)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    pids = _pids(pidfile)  # sleep &, setsid sleep, bash itself
    assert reaper, "no reaper process was started"
    assert _gone(*pids), "processes of the call outlived the SIGKILLed nexus"
    spill_dir = Path(reaper[-1])
    assert spill_dir.name.startswith("nexus-bash-")
    deadline = time.monotonic() + 10
    while spill_dir.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not spill_dir.exists(), "the full-output directory was left behind"
