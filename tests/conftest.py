"""Shared fixtures for every layer: one torch thread, a folder of small checkpoints, Runs and Views over it.

Nothing here needs a server or an HTTP client; the app and the browser are tests/e2e/conftest.py's.
"""

from __future__ import annotations

from pathlib import Path

import os

import pytest
import torch

from attention_viz.data.checkpoints import save_checkpoint
from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer
from attention_viz.data.tasks import ALPHABET
from attention_viz.data.tokenizer import VOCAB_SIZE

ROOT = Path(__file__).resolve().parent.parent

# A family of tiny checkpoints (random weights, honest cards) for tests that need "trained" models
# without depending on what attention_viz/data/models ships: reverse at d_k 4, 16, 64 with 1/√d_k, and copy without it.
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
def runs(models_dir, one_thread):
    from attention_viz.service.runs import Runs

    return Runs(models_dir)


@pytest.fixture(scope="session")
def views(runs):
    from attention_viz.service.views import Views

    return Views(runs)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright drives Debian's Chromium (devtools.browser), for tests/e2e and tests/explorer alike."""
    from devtools.browser import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.exists():
        if os.environ.get("ATTENTION_VIZ_REQUIRE_BROWSER"):  # set by .ci/run: CI never skips the browser tests
            pytest.fail(f"{CHROMIUM} is missing, and the browser tests must run here")
        pytest.skip(f"{CHROMIUM} is missing (`bash .ci/run` installs it)")
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM), "headless": True, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def minilm_folder() -> Path:
    """The trained all-MiniLM-L6-v2 folder (devtools.trained_models), extracted once per machine; skipped only
    where its package is absent and ATTENTION_VIZ_REQUIRE_BROWSER is unset (CI sets it: it fails instead)."""
    from devtools.trained_models import TrainedModelMissing, minilm_folder

    try:
        return minilm_folder()
    except TrainedModelMissing as error:
        if os.environ.get("ATTENTION_VIZ_REQUIRE_BROWSER"):  # set by .ci/run: CI never skips the trained model
            pytest.fail(f"the trained model must be tested here: {error}")
        pytest.skip(f"no trained real model: {error}")
