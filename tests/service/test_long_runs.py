"""A real model reading a page in the service (service.long_runs): the kept runs' budget for the whole server (least
recently used dropped first, its visitor told), the model's positions as a cap said on screen, refusals."""

from __future__ import annotations

import base64
import os

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from attention_viz.service.limits import (LONG_KEPT_BYTES, LONG_KEPT_ENV, LONG_TEXT_CHARS, LONG_TOKENS,  # noqa: E402
                                          LONG_TOKENS_GPU, REAL_DEVICE_ENV)
from attention_viz.service.long_runs import LongRefusal, LongRuns, kept_estimate  # noqa: E402
from attention_viz.service.real_models import RealModels  # noqa: E402
from devtools.hub_models import save_tiny  # noqa: E402

TEXT = "the cat sat on the mat and the model reads every word of the sentence. " * 12  # ~170 GPT-2 pieces


@pytest.fixture(scope="module")
def real(tmp_path_factory, one_thread):
    os.environ["HF_HUB_OFFLINE"] = "1"
    root = tmp_path_factory.mktemp("long-real")
    return RealModels([str(save_tiny(family, root / f"tiny-{family}")) for family in ("gpt2", "bert", "marian")])


def test_kept_runs_fit_one_budget_the_least_recently_used_dropped_first(real):
    """Three runs in a budget for two: the one not looked at since is dropped, its view says so, the others answer;
    the kept bytes never pass the budget."""
    elsewhere = LongRuns(real).read("hub:tiny-gpt2", "the cat")["run"]  # another server's run
    runs = LongRuns(real)
    first = runs.read("hub:tiny-gpt2", TEXT)
    kept = runs.kept_bytes
    model = real.get("hub:tiny-gpt2")
    assert kept == kept_estimate(model, first["length"])  # room is made before the pass, by this
    runs.budget = 2 * kept + kept // 2  # room for two
    second = runs.read("hub:tiny-gpt2", TEXT)
    ask = {"what": "region", "key": first["keys"][0], "head": 1, "rows": [0, 8], "cols": [0, 8]}
    assert "data" in runs.view({**ask, "run": first["run"]})  # first is now the most recently used
    third = runs.read("hub:tiny-gpt2", TEXT)
    assert runs.kept_bytes == 2 * kept <= runs.budget and len(runs) == 2 and runs.dropped_count == 1
    assert "dropped to make room" in runs.view({**ask, "run": second["run"]})["error"]
    for payload in (first, third):
        region = runs.view({**ask, "run": payload["run"]})
        weights = np.frombuffer(base64.b64decode(region["data"]), "<f4").reshape(8, 8)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)  # rows 0..7 see keys 0..7 only: each sums to 1
    assert "no longer on the server" in runs.view({**ask, "run": elsewhere})["error"]


def test_a_model_reads_what_its_positions_hold_and_says_so(real):
    """BERT's tiny model has 256 positions: a longer text is read to 256 tokens and the note says of how many."""
    payload = LongRuns(real).read("hub:tiny-bert", TEXT * 2)
    assert payload["read"] == payload["length"] == 256 < payload["of"]
    assert f"first 256 of the text's {payload['of']:,} tokens" in payload["note"]
    assert "positions end at 256" in payload["note"]
    run = real.get("hub:tiny-bert").long_run(TEXT * 2, warn=False)  # the package says it in the same sentence
    run.close()
    assert (run.length, run.given, run.note) == (payload["read"], payload["of"], payload["note"])
    assert len(payload["pieces"]) == len(payload["wordOf"]) == 256
    overview = payload["overview"]
    assert overview["side"] == 256 and overview["block"] == 1 and overview["sink"] is True
    short = LongRuns(real).read("hub:tiny-gpt2", "the cat sat on the mat")
    assert short["read"] == short["of"] and short["note"] == ""


def test_a_translation_model_reads_the_page_with_its_encoder_and_says_so(real):
    """Marian (tiny: 256 positions): its encoder's maps only, capped at its positions, the note saying both; the
    budget counts the encoder's maps alone, and a region of the kept run is a softmax's rows (every key seen)."""
    runs = LongRuns(real)
    payload = runs.read("hub:tiny-marian", TEXT * 2)
    model = real.get("hub:tiny-marian")
    assert payload["read"] == payload["length"] == 256 < payload["of"]
    assert payload["keys"] == ["encoder.0.self_attn", "encoder.1.self_attn"]
    assert "positions end at 256" in payload["note"] and "reads the page with its encoder" in payload["note"]
    assert runs.kept_bytes == kept_estimate(model, 256) == 2 * (4 + 4) * 8 * 256 * 4 + 2 * 4 * 256 * 4
    region = runs.view({"run": payload["run"], "what": "region", "key": "encoder.1.self_attn", "head": 3,
                        "rows": [200, 208], "cols": [0, 256]})
    weights = np.frombuffer(base64.b64decode(region["data"]), "<f4").reshape(8, 256)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert (weights[:, 240:] > 0).all()  # keys after the row are seen: the encoder's mask is not causal


@pytest.mark.parametrize("text, model, message", [
    ("   ", "hub:tiny-gpt2", "Paste a text"),
    ("x" * 40_001, "hub:tiny-gpt2", "at most 40,000"),
    ("the cat", "hub:nope", "Unknown model"),
])
def test_a_bad_page_is_refused_with_a_sentence_and_nothing_kept(real, text, model, message):
    runs = LongRuns(real)
    with pytest.raises(ValueError, match=message):
        runs.read(model, text)
    assert len(runs) == 0


def test_a_bad_view_answers_an_error_never_raises(real):
    runs = LongRuns(real)
    payload = runs.read("hub:tiny-gpt2", "the cat sat on the mat")
    base = {"run": payload["run"], "key": payload["keys"][0], "head": 0}
    for asked, message in [("x", "overview or region"), ({**base, "head": 9}, "Head 9 does not exist"),
                           ({**base, "key": "x"}, "no map"), ({**base, "what": "zoom"}, "not 'zoom'"),
                           ({**base, "what": "region", "rows": [0, 999], "cols": [0, 2]}, "not inside"),
                           ({**base, "what": "overview", "reduce": "sum"}, "max or mean")]:
        assert message in runs.view(asked)["error"]
    sinkless = runs.view({**base, "what": "overview", "reduce": "mean", "sink": False})
    assert sinkless["sink"] is False and sinkless["reduce"] == "mean"
    with pytest.raises(LongRefusal):
        runs._get("unknown")


# -- a GPU server (service.long_runs.page_tokens, kept_budget; service.real_models.real_device): sized on this CPU
# machine with the device named, the arithmetic checked by hand; the pass itself on a GPU is tests/hub/test_cuda.py's


def on_device(model, device: str):
    """The model as the sizing reads it, said to be on `device` (no GPU is needed to size a pass for one)."""
    from types import SimpleNamespace

    return SimpleNamespace(device=torch.device(device), model=model.model, d_model=model.d_model,
                           n_heads=model.n_heads, d_k=model.d_k)


def test_a_gpu_server_reads_up_to_32k_tokens_as_its_free_memory_holds(real):
    """On the CPU a page is at most LONG_TOKENS; on a GPU LONG_TOKENS_GPU, fewer where half the device's free memory
    holds fewer at the pass's bytes per token (GPT-2's: residual, q k v, its 4 x d_model inner states, a block's
    scores), in the weights' dtype."""
    from attention_viz.fast.blockwise import ROWS
    from attention_viz.service.long_runs import page_tokens, pass_bytes_per_token

    model = real.get("hub:tiny-gpt2")
    d, H, d_k = model.d_model, model.n_heads, model.d_k
    per_token = 4 * (4 * d + 3 * H * d_k + 3 * 4 * d) + 8 * H * ROWS  # float32 weights; GPT-2 has no grouped heads
    assert pass_bytes_per_token(model) == per_token
    assert page_tokens(model) == LONG_TOKENS  # this machine's CPU: the free memory is not asked
    gpu = on_device(model, "cuda:0")
    assert page_tokens(gpu, free_bytes=2**40) == LONG_TOKENS_GPU == 32_768  # room for more: the cap
    assert page_tokens(gpu, free_bytes=2 * 1000 * per_token) == 1000        # half of it for the pass
    assert page_tokens(gpu, free_bytes=0) == 1                               # never 0 (the pass says why it is short)


def test_an_8b_model_on_one_24_gb_gpu_reads_a_page_its_memory_holds():
    """Llama 3.1 8B's shape in bfloat16 (16 GB of weights) on a 24 GB GPU: half the 8 GB left holds ~29k tokens
    of its pass (one layer's working set, ~147 kB a token); on an 80 GB one every 32k."""
    from types import SimpleNamespace

    from attention_viz.service.long_runs import page_tokens, pass_bytes_per_token

    config = SimpleNamespace(intermediate_size=14_336, num_key_value_heads=8)
    weights = SimpleNamespace(parameters=lambda: iter([torch.zeros(1, dtype=torch.bfloat16)]), config=config)
    llama = SimpleNamespace(device=torch.device("cuda:0"), model=weights, d_model=4096, n_heads=32, d_k=128)
    per_token = 2 * (4 * 4096 + (32 + 16) * 128 + 3 * 14_336) + 8 * 32 * 64
    assert pass_bytes_per_token(llama) == per_token == 147_456
    assert page_tokens(llama, free_bytes=8 * 2**30) == 8 * 2**30 // 2 // per_token == 29_127
    assert page_tokens(llama, free_bytes=64 * 2**30) == 32_768


def test_a_gpu_server_keeps_more_and_takes_longer_texts(real, monkeypatch, tmp_path):
    """A GPU server's kept runs get half the temporary disk's free space (at least LONG_KEPT_BYTES), the operator's
    budget still first; its page takes LONG_TEXT_CHARS per LONG_TOKENS tokens, eight times the CPU's."""
    import shutil

    from attention_viz.service.long_runs import kept_budget

    monkeypatch.delenv(LONG_KEPT_ENV, raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    half = shutil.disk_usage(tmp_path).free // 2
    assert kept_budget("cpu") == LONG_KEPT_BYTES
    assert kept_budget("cuda:0") == max(LONG_KEPT_BYTES, half) > 0
    monkeypatch.setenv(LONG_KEPT_ENV, "100")
    assert kept_budget("cuda:0") == kept_budget("cpu") == 100 * 2**20
    runs = LongRuns(real)
    assert (runs.tokens, runs.chars) == (LONG_TOKENS, LONG_TEXT_CHARS)
    with pytest.raises(LongRefusal, match=f"at most {LONG_TEXT_CHARS:,}"):
        runs.read("hub:tiny-gpt2", "a" * (LONG_TEXT_CHARS + 1))
    monkeypatch.setattr(real, "device", "cuda:0")
    gpu = LongRuns(real)
    assert (gpu.tokens, gpu.chars) == (32_768, 8 * LONG_TEXT_CHARS)


def test_real_models_run_where_the_operator_says_or_on_a_gpu_when_there_is_one(monkeypatch):
    """ATTENTION_VIZ_DEVICE: unset or "auto" -> a GPU where there is one, else the CPU; a GPU asked for where there is
    none, or a name that is not a device, refused at start with the variable named."""
    from attention_viz.service.real_models import real_device

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert real_device(environ={}) == real_device(environ={REAL_DEVICE_ENV: "auto"}) == expected
    assert real_device(environ={REAL_DEVICE_ENV: " cpu "}) == real_device("cpu") == "cpu"
    assert RealModels([], device="cpu").device == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=f"{REAL_DEVICE_ENV}: .*CUDA is not available.*auto or cpu"):
            real_device(environ={REAL_DEVICE_ENV: "cuda"})
    with pytest.raises(ValueError, match=f"{REAL_DEVICE_ENV}='gpu' is not a device; set it to auto, cpu, cuda"):
        real_device(environ={REAL_DEVICE_ENV: "gpu"})


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
def test_on_a_gpu_server_a_page_reads_as_on_the_cpu(tmp_path):
    """The same tiny GPT-2 set up on the GPU and on the CPU: the page's summaries and a region's exact weights agree
    (float32, to the kernels' rounding), and the GPU server offers LONG_TOKENS_GPU."""
    folder = str(save_tiny("gpt2", tmp_path / "tiny-gpt2"))
    pages = [LongRuns(RealModels([folder], device=device)) for device in ("cpu", "cuda")]
    assert pages[1].tokens == LONG_TOKENS_GPU and pages[0].tokens == LONG_TOKENS
    read = [runs.read("hub:tiny-gpt2", TEXT) for runs in pages]
    assert read[0]["length"] == read[1]["length"] and read[0]["keys"] == read[1]["keys"]
    ask = {"what": "region", "key": read[0]["keys"][-1], "head": 1, "rows": [40, 72], "cols": [0, 64]}
    regions = [np.frombuffer(base64.b64decode(runs.view({**ask, "run": payload["run"]})["data"]), "<f4")
               for runs, payload in zip(pages, read)]
    np.testing.assert_allclose(regions[1], regions[0], atol=1e-5)
