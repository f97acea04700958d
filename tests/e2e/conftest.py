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


UNREACHABLE = "Helsinki-NLP/opus-mt-xx-yy"  # a real model set up, but neither cached nor downloadable here


@pytest.fixture(scope="session")
def real_models_app(tmp_path_factory):
    """`python app.py` set up with three real models, in this order: one that cannot be had (UNREACHABLE), a tiny
    Marian and a tiny GPT-2 (random weights, real tokenizers, saved offline), with the Hub off: its base URL and its
    log. Shared by tests/e2e/test_real_models_client.py and tests/e2e/test_teacher_walk.py (one start, not two)."""
    pytest.importorskip("transformers")
    from devtools.hub_models import save_tiny

    root = tmp_path_factory.mktemp("real")
    marian, gpt2 = save_tiny("marian", root / "tiny-marian"), save_tiny("gpt2", root / "tiny-gpt2")
    with running_app(root / "app.log", [UNREACHABLE, marian, gpt2], HF_HOME=str(root / "hf-home")) as server:
        yield server.base, root / "app.log"
