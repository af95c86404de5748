"""A bare JSON-RPC-over-stdio MCP server for faults the SDK's own server will not produce.

``python raw_server.py MODE``:

- ``ok``: answers the handshake and ``tools/list`` (tools ``echo``, ``garbage``, ``bad``, ``grow``);
  ``echo`` answers, ``garbage`` writes lines that are not JSON-RPC and never answers, ``bad`` answers
  with a result that is no ``CallToolResult``, ``grow`` adds a tool ``grown`` and sends
  ``notifications/tools/list_changed`` (the 2025 way), ``quit`` exits without answering;
- ``once``: like ``ok`` the first time it is started, like ``hang`` every time after that;
- ``hang``: reads everything and never answers;
- ``junk``: answers every request with a line that is not JSON (``$RAW_PAD`` x's and
  ``$RAW_PASSWORD`` when ``RAW_PAD`` is set);
- ``exit``: writes a line to stderr (first one quoting ``$RAW_PASSWORD`` when it is set, after
  ``$RAW_PAD`` x's) and exits
  with status 7 at once.

Each start appends a line to ``$NEXUS_TEST_MARKS/starts`` when that variable is set.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

TOOLS = [
    {"name": name, "description": f"the {name} tool", "inputSchema": {"type": "object", "properties": {}}}
    for name in ("echo", "garbage", "bad", "grow", "quit")
]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict[str, object]) -> None:
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        return  # a notification
    if method == "initialize":
        params = request.get("params") or {}
        version = params.get("protocolVersion", "2025-11-25") if isinstance(params, dict) else "2025-11-25"
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = (request.get("params") or {}).get("name")  # type: ignore[union-attr]
        if name == "echo":
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "echo"}]}})
        elif name == "quit":
            os._exit(0)
        elif name == "grow":
            TOOLS.append({"name": "grown", "description": "added later", "inputSchema": {"type": "object"}})
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "grew"}]}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        elif name == "bad":
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": "not a list"}})
        else:
            sys.stdout.write("<html>502 Bad Gateway</html>\nstill not json\n")
            sys.stdout.flush()
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}})


def _count_start() -> int:
    marks = os.environ.get("NEXUS_TEST_MARKS")
    if not marks:
        return 1
    starts = Path(marks) / "starts"
    with starts.open("a") as file:
        file.write(f"{os.getpid()}\n")
    return len(starts.read_text().splitlines())


def main() -> None:
    mode = sys.argv[1]
    if mode == "once":
        mode = "ok" if _count_start() == 1 else "hang"
    else:
        _count_start()
    pad = "x" * int(os.environ.get("RAW_PAD", "0"))  # puts $RAW_PASSWORD across the cut of a quote
    if mode == "exit":
        secret = os.environ.get("RAW_PASSWORD")
        if secret:
            sys.stderr.write(f"raw-server: {pad}login with password {secret} refused\n")
        sys.stderr.write("raw-server: cannot open the database\n")
        sys.exit(7)
    for line in sys.stdin:
        if mode == "hang":
            continue
        if mode == "junk":
            sys.stdout.write(f"{pad}{os.environ['RAW_PASSWORD']}\n" if pad else "Welcome to raw-server 1.0!\n")
            sys.stdout.flush()
            continue
        answer(json.loads(line))


if __name__ == "__main__":
    main()
