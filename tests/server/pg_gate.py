"""A TCP gate in front of the tests' real PostgreSQL: ``down()`` refuses and cuts every connection, as a
stopped server does, and ``up()`` lets them through again on the same port, so one process can watch the
database go away and come back without stopping the cluster the other tests share."""

from __future__ import annotations

import select
import socket
import threading
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit


class PgGate:
    """Forward 127.0.0.1:<port> to the server of ``url``; :attr:`url` is ``url`` through the gate."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self.port = self._listen(0)
        netloc = f"{parts.username}@127.0.0.1:{self.port}" if parts.username else f"127.0.0.1:{self.port}"
        self.url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def _listen(self, port: int) -> int:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return int(listener.getsockname()[1])

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by down()
            try:
                server = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, server]
            threading.Thread(target=self._pipe, args=(client, server), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        peer = {a: b, b: a}
        try:
            while True:
                ready, _, _ = select.select([a, b], [], [], 1.0)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peer[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            a.close()
            b.close()

    def down(self) -> None:
        """Refuse new connections and cut the open ones (their reads see the connection closed)."""
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    def up(self) -> None:
        """Accept connections again, on the same port."""
        if self._listener is None:
            self._listen(self.port)

    def __enter__(self) -> PgGate:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.down()
