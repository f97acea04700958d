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
    """`python app.py` set up with four real models, in this order: one that cannot be had (UNREACHABLE), a tiny
    Marian, a tiny GPT-2 and a wide Marian (d_model 256, 16 heads, 3 layers: 144 heads, as opus-mt), random weights,
    real tokenizers, saved offline, with the Hub off: its base URL and its log. Shared by the real models' client and
    browser tests and the teacher's walk (tests/e2e/test_real_models_*.py, test_teacher_walk.py): one start, not three.
    The lesson's real steps go to the first that can be had, tiny Marian."""
    pytest.importorskip("transformers")
    from devtools.hub_models import save_tiny

    root = tmp_path_factory.mktemp("real")
    folders = [save_tiny("marian", root / "tiny-marian"), save_tiny("gpt2", root / "tiny-gpt2"),
               save_tiny("marian", root / "wide-marian", d_model=256, n_heads=16, layers=3)]
    with running_app(root / "app.log", [UNREACHABLE, *folders], HF_HOME=str(root / "hf-home")) as server:
        yield server.base, root / "app.log"


@pytest.fixture(scope="session")
def bias_models_app(tmp_path_factory):
    """`python app.py` set up with real models that add a position bias to QKᵀ, tiny T5 (learned relative positions)
    and tiny Bloom (ALiBi), and one that adds none, tiny GPT-2: random weights, saved offline (devtools.tiny_archs,
    devtools.hub_models), the Hub off. (base URL, folders by name), shared by the position bias's client and browser
    tests."""
    pytest.importorskip("transformers")
    from devtools import tiny_archs
    from devtools.hub_models import save_tiny

    root = tmp_path_factory.mktemp("bias")
    folders = {"t5": tiny_archs.save("t5", root / "tiny-t5"), "bloom": tiny_archs.save("bloom", root / "tiny-bloom"),
               "gpt2": save_tiny("gpt2", root / "tiny-gpt2")}
    with running_app(root / "app.log", list(folders.values()), HF_HOME=str(root / "hf-home")) as server:
        yield server.base, folders


@pytest.fixture(scope="session")
def media_app(tmp_path_factory):
    """`python app.py` set up with a tiny DeiT (class and distillation tokens), a tiny Whisper (a 12 s window: 600
    encoder positions, its long view's overview in blocks of 2 x 2) and a
    tiny Marian, random weights, saved offline, the Hub off: its base URL, its log and the folder of its files. Shared
    by the pictures-and-sound client and browser tests (tests/e2e/test_media_*.py)."""
    pytest.importorskip("transformers")
    from devtools.hub_models import save_tiny, save_tiny_image, save_tiny_whisper

    root = tmp_path_factory.mktemp("media")
    folders = [save_tiny_image("deit", root / "tiny-deit"), save_tiny_whisper(root / "tiny-whisper", seconds=12),
               save_tiny("marian", root / "tiny-marian")]
    with running_app(root / "app.log", folders, HF_HOME=str(root / "hf-home")) as server:
        yield server.base, root / "app.log", root
