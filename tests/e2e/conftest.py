"""End-to-end fixtures: the app launched on a free loopback port, and Debian's Chromium for Playwright."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest

from devtools.launcher import Server

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "tests" / "screenshots"  # git-ignored
APP_START_TIMEOUT_S = 180


@pytest.fixture(scope="session")
def app_url(tmp_path_factory) -> str:
    """`python app.py` on a free loopback port, as a user starts it; shared by the client and browser tests."""
    with Server([sys.executable, "app.py"], tmp_path_factory.mktemp("app") / "app.log") as server:
        with httpx.Client(timeout=5) as client:
            server.wait_http(client, APP_START_TIMEOUT_S)
        yield server.base + "/"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright drives Debian's Chromium (never a downloaded build); see shared BROWSER_TESTING.md."""
    if not CHROMIUM.exists():
        if os.environ.get("ATTENTION_VIZ_REQUIRE_BROWSER"):  # set by .ci/run: CI never skips the browser tests
            pytest.fail(f"{CHROMIUM} is missing, and the browser tests must run here")
        pytest.skip(f"{CHROMIUM} is missing (`bash .ci/run` installs it)")
    return {
        **browser_type_launch_args,
        "executable_path": str(CHROMIUM),
        "headless": True,
        "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    }
