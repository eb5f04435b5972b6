"""A TCP proxy in front of PostgreSQL that a test can cut: every connection through it
breaks and new ones are refused, as when the database host goes away; restore() lets
connections through again. freeze() kills the connections open now without a word, as a
NAT gateway or a failover that lost them: what is sent on them is swallowed and nothing
comes back, while new connections work."""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    def __init__(
        self, target_port: int, target_host: str = "127.0.0.1", listen_host: str = "127.0.0.1"
    ) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server((listen_host, 0))
        self.port = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._sockets: set[socket.socket] = set()
        self._frozen: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._open.is_set():
                client.close()
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets |= {client, server}
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if src not in self._frozen:
                    dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Break every connection and refuse new ones."""
        self._open.clear()
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            self._sockets.clear()

    def freeze(self) -> None:
        """The connections open now stay open but carry nothing any more."""
        with self._lock:
            self._frozen |= self._sockets

    def restore(self) -> None:
        self._open.set()

    def close(self) -> None:
        self.cut()
        self._listener.close()
