"""End-to-end fixtures: the app launched on a free loopback port, and Debian's Chromium for Playwright."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.launcher import running_app

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "tests" / "screenshots"  # git-ignored
APP_START_TIMEOUT_S = 180


@pytest.fixture(scope="session")
def app_url(tmp_path_factory) -> str:
    """`python app.py` on a free loopback port, as a user starts it; shared by the client and browser tests."""
    with running_app(tmp_path_factory.mktemp("app") / "app.log", timeout_s=APP_START_TIMEOUT_S) as server:
        yield server.base + "/"
