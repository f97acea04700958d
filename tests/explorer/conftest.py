"""Explorer fixtures: packed runs of the shipped model and of the widest untrained shape, and Debian's Chromium.

The browser tests open the HTML that explorer_html writes (file:// or set_content): no server, no network.
The Chromium launch follows tests/e2e/conftest.py (and /work/shared BROWSER_TESTING.md): skipped with the
reason where /usr/bin/chromium is missing, failed instead when ATTENTION_VIZ_REQUIRE_BROWSER is set.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer
from attention_viz.data.checkpoints import load_model
from attention_viz.data.tokenizer import VOCAB_SIZE
from attention_viz.explorer.notebook import run_model
from attention_viz.service.catalog import Catalog

SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"  # git-ignored
# The widest run the app allows on an untrained model: 16 heads, 32 characters (the app's limit, the dates
# model's max_len) + <eos> + 16 pads, N = 2. The maps' shapes depend only on heads and tokens, so a narrow
# d_model gives the same payload quickly.
WIDEST_TEXT, WIDEST_PADS, WIDEST_HEADS = "abcdefghijklmnopqrstuvwxyzabcdef", 16, 16


@pytest.fixture(scope="session")
def shipped_model(one_thread):
    return load_model("reverse", device="cpu")[0]


@pytest.fixture(scope="session")
def shipped_payload(shipped_model):
    """reverse on a 5-character text with 2 pads: masked keys in every kind, the causal mask in decoder self."""
    return run_model(shipped_model, "hello", pad_tokens=2)


@pytest.fixture(scope="session")
def widest_model(one_thread):
    config = TransformerConfig(vocab_size=VOCAB_SIZE, n_encoder_layers=2, n_decoder_layers=2, d_model=32,
                               n_heads=WIDEST_HEADS, d_k=4, d_v=2, d_ff=64, dropout=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Transformer(config).eval()


@pytest.fixture(scope="session")
def widest_payload(widest_model):
    assert len(WIDEST_TEXT) == Catalog().tokenizer.max_len
    # an untrained model decodes exactly as many tokens as the source has characters + 1 (the app's rule)
    return run_model(widest_model, WIDEST_TEXT, pad_tokens=WIDEST_PADS, max_len=len(WIDEST_TEXT) + 1)
