"""Shared fixtures: a folder of small checkpoints, an Explorer over it, and the app launched on a free loopback port."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest
import torch

from attention_viz.checkpoints import save_checkpoint
from attention_viz.config import TransformerConfig
from attention_viz.model import Transformer
from attention_viz.tasks import ALPHABET
from attention_viz.tokenizer import VOCAB_SIZE
from benchmarks.app import Server

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "tests" / "screenshots"  # git-ignored
APP_START_TIMEOUT_S = 180

# A family of tiny checkpoints (random weights, honest cards) for tests that need "trained" models
# without depending on what assets/models ships: reverse at d_k 4, 16, 64 with 1/√d_k, and copy without it.
FAKE_FAMILY = [("reverse", "sqrt_dk", 4), ("reverse", "sqrt_dk", 16), ("reverse", "sqrt_dk", 64), ("copy", "none", 16)]


@pytest.fixture(scope="session")
def one_thread():
    """One torch thread, as the server runs: on 2 shared cores, 2 threads can be 100x slower for these sizes."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    """A checkpoint folder with FAKE_FAMILY: the cards say what a trained model's card says."""
    folder = tmp_path_factory.mktemp("models")
    for seed, (task, scale, d_k) in enumerate(FAKE_FAMILY):
        config = TransformerConfig(vocab_size=VOCAB_SIZE, n_encoder_layers=2, n_decoder_layers=2, d_model=16,
                                   n_heads=2, d_k=d_k, d_v=8, d_ff=32, dropout=0.0)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Transformer(config).eval()
        card = {"task": task, "scale": scale, "alphabet": ALPHABET, "max_len": 24, "heldout_exact_match": 0.5}
        save_checkpoint(model, card, folder / f"{task}_dk{d_k}_{scale}")
    return folder


@pytest.fixture(scope="session")
def explorer(models_dir, one_thread):
    from attention_viz.session import Explorer

    return Explorer(models_dir)


@pytest.fixture(scope="session")
def views(explorer):
    from attention_viz.views import Views

    return Views(explorer)


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
