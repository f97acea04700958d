"""A Hub that never answers, for fault tests: a socket on 127.0.0.1 that accepts every connection and says nothing.

    with SilentHub() as hub:          # hub.url: "http://127.0.0.1:<port>", hub.held: the connections it accepted
        ... HF_ENDPOINT=hub.url ...
"""

from __future__ import annotations

import socket
import threading


class SilentHub:
    """Accepts connections on a free loopback port and never answers; closes them all on exit."""

    def __enter__(self) -> SilentHub:
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self._server.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="silent hub", daemon=True)
        self._thread.start()
        return self

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                self.held.append(self._server.accept()[0])
            except OSError:  # the accept's timeout, or the socket closed
                continue

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(2)
        for connection in self.held:
            connection.close()
        self._server.close()
