"""A TCP link to a real server that a test breaks on cue. It goes away at a chosen
command (``cut_after``): it forwards the command, then drops every connection
before the reply and refuses new ones, as a Redis killed the instant it applied a
write does to the client that sent it. Or it holds the server's replies back
(``hold``, then ``release``), as a slow link does: the command is applied and its
reply is still on its way."""

from __future__ import annotations

import socket
import threading

CHUNK = 65536


class CutLink:
    def __init__(self, target_port: int, cut_after: bytes | None = None) -> None:
        self._target, self._cut_after = target_port, cut_after
        self.cut = threading.Event()
        self._flowing = threading.Event()
        self._flowing.set()
        self._listener = socket.create_server(("127.0.0.1", 0))  # a port of its own, never one found free
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while not self.cut.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:  # the listener closed: cut
                return
            server = socket.create_connection(("127.0.0.1", self._target))
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, watched: bool) -> None:
        try:
            while data := source.recv(CHUNK):
                if self.cut.is_set():  # past the command: its reply (it applied) or a later one
                    self._go_away()  # never delivered
                    return
                if watched and self._cut_after is not None and self._cut_after in data:
                    self.cut.set()
                if not watched:
                    self._flowing.wait()
                sink.sendall(data)
        except OSError:
            return

    def _go_away(self) -> None:
        self.cut.set()
        with self._lock:
            for s in self._sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def hold(self) -> None:
        """Replies from here on wait until ``release``."""
        self._flowing.clear()

    def release(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self.release()
        self._go_away()
