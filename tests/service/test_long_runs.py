"""A real model reading a page in the service (service.long_runs): the kept runs' budget for the whole server (least
recently used dropped first, its visitor told), the model's positions as a cap said on screen, refusals."""

from __future__ import annotations

import base64
import os

import numpy as np
import pytest

pytest.importorskip("transformers")

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
