"""``nexus send`` to a running server that did not answer: the message may have been accepted all the same.

The CLI makes the message's id itself, so a retry with the same id is never queued twice; but the error
("did not answer", exit 1) never named the id, and the natural retry (the same command again) made a new one:
a stopped server that woke up ran the message twice. The error now names the id and the ``--id`` to repeat.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from nexus.broker import AgentMessage
from nexus.cli.send_cmd import _post_message
from nexus.server import NoAnswerError
from nexus.server.discovery import RunningServer


@pytest.fixture
def hangs_up() -> Iterator[str]:
    """A local address that takes each connection, reads the request and closes without an answer (a server
    killed right after it committed the message)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    host, port = listener.getsockname()[:2]
    yield f"http://{host}:{port}"
    stop.set()
    listener.close()
    thread.join(timeout=5)


def test_a_send_the_server_did_not_answer_names_the_id_to_repeat(hangs_up: str) -> None:
    message = AgentMessage(id="01SENDNOANSWER", from_="user", to="worker", content="hello")
    body = {"content": message.content, "mode": None, "id": message.id, "from": message.from_}
    with pytest.raises(NoAnswerError) as refused:
        _post_message(RunningServer(pid=1, url=hangs_up, token=None), message, body)
    said = str(refused.value)
    assert "did not answer" in said and "may have accepted the message" in said
    assert "--id 01SENDNOANSWER" in said
