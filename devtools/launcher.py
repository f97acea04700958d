"""One app launcher for tests, benchmarks and scripts: a free loopback port, start, wait for HTTP 200, stop."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(process: subprocess.Popen, grace_s: float = 10) -> None:
    """End a child process: terminate, and kill it if it is still there after grace_s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Server:
    """A Gradio app started as a subprocess on a free loopback port; stopped (by its own pid) on exit.

    Args:
        argv: the command, e.g. [sys.executable, "app.py"], run in the repository root.
        log: where its stdout and stderr go.
        host: GRADIO_SERVER_NAME; None leaves it unset, so the app picks its own default bind.
        env: more environment variables (GRADIO_TEMP_DIR, TMPDIR, ...).
        cwd: where it runs (default the repository root), e.g. another checkout's tree to compare against.
    """

    def __init__(self, argv: list[str], log: Path, host: str | None = "127.0.0.1",
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        environ = {k: v for k, v in os.environ.items() if k not in ("GRADIO_SERVER_NAME", "GRADIO_SHARE")}
        environ |= {"GRADIO_SERVER_PORT": str(self.port), "GRADIO_ANALYTICS_ENABLED": "False", **(env or {})}
        if host is not None:
            environ["GRADIO_SERVER_NAME"] = host
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log = log
        self._log_file = open(log, "w")
        self.started = time.perf_counter()
        self.process = subprocess.Popen(argv, cwd=cwd or ROOT, env=environ, stdout=self._log_file,
                                        stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_http(self, client, timeout_s: float = 120.0) -> float:
        """Seconds from start to the first HTTP 200 on /; RuntimeError (with the log's end) if it exits or never answers."""
        while time.perf_counter() - self.started < timeout_s:
            if self.process.poll() is not None:
                raise RuntimeError(f"the app exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                ready = client.get(self.base + "/").status_code == 200
            except httpx.TransportError:  # not listening yet
                ready = False
            if ready:
                return time.perf_counter() - self.started
            time.sleep(0.02)
        raise RuntimeError(f"no HTTP 200 from {self.base} in {timeout_s} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        self._log_file.flush()
        return self.log.read_text()[-chars:]

    def stop(self) -> None:
        stop_process(self.process)
        self._log_file.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def running_app(log: Path, hub_models=(), host: str | None = "127.0.0.1", timeout_s: float = 180.0,
                **env: str) -> Iterator[Server]:
    """`python app.py` as a user starts it, answering HTTP: the Server, stopped on exit.

    hub_models: the real models it is set up with (folders or Hub names, ATTENTION_VIZ_HUB_MODELS), offline
    (HF_HUB_OFFLINE=1) unless env says otherwise; env: more variables (HF_HOME, GRADIO_TEMP_DIR, ...)."""
    if hub_models:
        env = {"ATTENTION_VIZ_HUB_MODELS": ",".join(map(str, hub_models)), "HF_HUB_OFFLINE": "1", **env}
    with Server([sys.executable, "app.py"], log, host=host, env=env) as server:
        with httpx.Client(timeout=5) as client:
            server.wait_http(client, timeout_s)
        yield server
