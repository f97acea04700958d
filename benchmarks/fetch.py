"""A browser's fetch of a page's files, at little cost to the machine that simulates the class.

A browser with an empty cache asks for a page's files over six keep-alive connections, each request sent once the
one before it on that connection has been answered. `fetch_files` does the same over raw sockets, one thread for
the six: httpx spent ~80 ms of CPU on the ~70 files of one opening (its connection pool, a thread per connection,
decoding what it fetched), several times what the server spent answering them, so a class of a hundred, simulated
on the app's own two cores, measured the simulator more than the app. Here an opening's files cost a few ms of the
client's CPU. Bodies are read, never decoded; every answer must be 200 and complete (Content-Length or chunked).
"""

from __future__ import annotations

import selectors
import socket
import time
from urllib.parse import urlsplit

CONNECTIONS = 6  # what a browser opens to one host over HTTP/1.1


class FetchError(RuntimeError):
    """A file that did not come back whole with a 200."""


class _Connection:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.buffer = b""
        self.path: str | None = None

    def send(self, request: bytes, path: str) -> None:
        self.sock.setblocking(True)
        self.sock.sendall(request)
        self.sock.setblocking(False)
        self.path = path

    def answered(self) -> bool:
        """Read what has arrived; True once the answer to the request in flight is complete (and consumed)."""
        while True:
            try:
                data = self.sock.recv(1 << 18)
            except BlockingIOError:
                break
            if not data:
                raise FetchError(f"{self.path}: the server closed the connection")
            self.buffer += data
        head, sep, rest = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            return False
        lines = head.split(b"\r\n")
        if not lines[0].startswith(b"HTTP/1.1 200"):
            raise FetchError(f"{self.path}: {lines[0].decode('latin-1')}")
        headers = dict(line.lower().split(b": ", 1) for line in lines[1:] if b": " in line)
        if b"content-length" in headers:
            size = int(headers[b"content-length"])
            if len(rest) < size:
                return False
            self.buffer = rest[size:]
        elif headers.get(b"transfer-encoding") == b"chunked":
            end = rest.find(b"\r\n0\r\n\r\n") if not rest.startswith(b"0\r\n\r\n") else -2
            if end == -1:
                return False
            self.buffer = rest[end + 7:]
        else:
            raise FetchError(f"{self.path}: an answer of unknown length")
        self.path = None
        return True


def fetch_files(base: str, paths: tuple[str, ...], headers: dict[str, str], timeout_s: float = 120.0) -> None:
    """GET every path from `base` over CONNECTIONS keep-alive connections; FetchError on any answer but a whole 200."""
    if not paths:
        return
    url = urlsplit(base)
    host, port = url.hostname, url.port or 80
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    waiting = list(reversed(paths))
    connections = [_Connection(host, port) for _ in range(min(CONNECTIONS, len(paths)))]
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        try:
            for connection in connections:
                selector.register(connection.sock, selectors.EVENT_READ, connection)
                _next(connection, waiting, host, port, extra)
            busy = len(connections)
            while busy:
                if time.monotonic() > deadline:
                    raise FetchError(f"no answer in {timeout_s:.0f} s")
                for key, _ in selector.select(timeout=1.0):
                    connection = key.data
                    if connection.path is not None and connection.answered():
                        if not _next(connection, waiting, host, port, extra):
                            busy -= 1
        finally:
            for connection in connections:
                connection.sock.close()


def _next(connection: _Connection, waiting: list[str], host: str, port: int, extra: str) -> bool:
    """Send the next waiting path on this connection; False when none is left."""
    if not waiting:
        return False
    path = waiting.pop()
    connection.send(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{extra}\r\n".encode("latin-1"), path)
    return True
