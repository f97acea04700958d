"""Debian's nginx in front of several app processes, as tests and benchmarks start it: sticky by a cookie, or not.

    with Proxy(["http://127.0.0.1:8001", "http://127.0.0.1:8002"], folder, sticky=True) as proxy:
        httpx.get(proxy.base + "/healthz")

Gradio's protocol keeps a session's state in the process that saw it: the queue's join (POST) and its event
stream (GET /queue/data) must reach the same process. Sticky here is a cookie: a request without one is routed by
a fresh random key (nginx's $request_id) and its answer sets `av_replica=<that key>`; every later request of that
browser carries it and `hash ... consistent` sends it to the same process (nginx's open-source `sticky cookie`).
Not ip_hash: behind NAT (a school's network, and every client of a loopback test) all students share one
address and would all land on one replica. `sticky=False` is plain round robin, to show what fails without it.

Every request is logged as `<upstream> <cookie> <method> <path> <status>` (`Proxy.routes()` reads it back), so a
test can see which process answered each browser. `ensure_nginx()` installs Debian's package where it is missing,
as `.ci/run` installs Chromium.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import httpx

from devtools.launcher import free_port, stop_process

NGINX = Path("/usr/sbin/nginx")
COOKIE = "av_replica"


def ensure_nginx() -> Path:
    """Debian's nginx, installed with apt-get (as root, or through sudo without a password) where it is missing;
    RuntimeError with the reason where it cannot be."""
    if NGINX.exists():
        return NGINX
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if sudo and shutil.which("sudo") is None:
        raise RuntimeError(f"{NGINX} is missing and this user can install nothing (not root, no sudo)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "nginx"]):
        done = subprocess.run(sudo + command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    if not NGINX.exists():
        raise RuntimeError(f"apt-get installed nginx, but {NGINX} is still missing")
    return NGINX


def nginx_config(upstreams: list[str], port: int, folder: Path, sticky: bool = True) -> str:
    """An nginx configuration: 127.0.0.1:port in front of `upstreams` ("http://host:port"); logs, pid and
    temporary files in `folder`."""
    servers = "\n".join(f"        server {u.removeprefix('http://')} max_fails=0;" for u in upstreams)
    routing = "        hash $av_route consistent;   # one browser (cookie), one replica\n" if sticky else (
        "        # round robin: each request to the next replica, whatever session it belongs to\n")
    return f"""worker_processes 1;
error_log {folder}/error.log warn;
pid {folder}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    log_format routes '$upstream_addr $cookie_{COOKIE} $request_method $uri $status';
    access_log {folder}/access.log routes;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;

    # The routing key: the browser's cookie, or for its first request a fresh random one, which the answer sets.
    map $cookie_{COOKIE} $av_route {{
        ""      $request_id;
        default $cookie_{COOKIE};
    }}
    map $cookie_{COOKIE} $av_set_cookie {{
        ""      "{COOKIE}=$request_id; Path=/; HttpOnly; SameSite=Lax";
        default "";   # nginx sends no header whose value is empty
    }}
    upstream attention_viz {{
{routing}{servers}
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://attention_viz;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_buffering off;        # Gradio's event streams go out as they come
            proxy_read_timeout 1h;      # a stream waits while the queue works
            add_header Set-Cookie $av_set_cookie always;
        }}
    }}
}}
"""


class Proxy:
    """nginx on a free loopback port in front of `upstreams`, its files in `folder`; stopped (by its pid) on exit."""

    def __init__(self, upstreams: list[str], folder: Path, sticky: bool = True, timeout_s: float = 20.0) -> None:
        nginx = ensure_nginx()
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.folder, self.sticky = folder, sticky
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)  # nginx's workers (not root) reach their temporary folders inside it
        self.config = folder / "nginx.conf"
        self.config.write_text(nginx_config(upstreams, self.port, folder, sticky))
        self._stderr = open(folder / "stderr.log", "w")
        self.process = subprocess.Popen([str(nginx), "-p", str(folder), "-c", str(self.config), "-g", "daemon off;"],
                                        stdout=subprocess.DEVNULL, stderr=self._stderr)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.process.returncode}: {self.log_tail()}")
            try:
                httpx.get(self.base + "/healthz", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"nginx did not answer on {self.base} in {timeout_s} s: {self.log_tail()}")
                time.sleep(0.05)

    def log_tail(self, chars: int = 2000) -> str:
        text = "".join(p.read_text() for p in (self.folder / "stderr.log", self.folder / "error.log") if p.exists())
        return text[-chars:]

    def routes(self) -> dict[str, set[str]]:
        """Each browser's cookie -> the replicas that answered it (requests without a cookie are left out)."""
        seen: dict[str, set[str]] = defaultdict(set)
        log = self.folder / "access.log"
        for line in log.read_text().splitlines() if log.exists() else ():
            upstream, cookie, *_ = line.split(" ")
            if cookie != "-" and upstream != "-":
                seen[cookie].add(upstream)
        return dict(seen)

    def stop(self) -> None:
        stop_process(self.process)
        self._stderr.close()

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
