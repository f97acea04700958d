"""Which heads matter in the service (service.heads_view): the payload is head_importance's numbers (points of
exact match), cached per model, scaling and ablation; its text is written from them; the CSV holds every head;
the untrained model is refused with the reason; a real model is scored on the text, its scores streamed as they
come."""

from __future__ import annotations


import numpy as np
import pytest

from attention_viz.importance import head_importance
from attention_viz.service import heads_view, hub_model
from attention_viz.service.heads_view import IMPORTANCE_STRINGS, HeadsView
from attention_viz.service.texts import scaling_text
from tests.service.conftest import own


def settings(runs, model="reverse/sqrt_dk", text="hello", scale="sqrt_dk", off=""):
    return runs.settings(text, model, 16, scale, 1.0, True, True, 0, 64, 4, None, off)


def test_the_payload_is_head_importances_numbers(views):
    s = settings(views.runs)
    data = views.heads.importance(s, "zero")
    model, card = own(views.runs, s)
    imp = head_importance(model, card["task"], n_texts=IMPORTANCE_STRINGS)
    assert data["format"] == "attention_viz.importance/1" and data["model"] == "reverse/sqrt_dk"
    assert data["texts"] == IMPORTANCE_STRINGS and data["total"] == 12 and data["n_heads"] == 2
    for key in imp.keys:
        np.testing.assert_allclose(data["drop"][key], imp.drop[key] * 100, atol=1e-4)
        np.testing.assert_allclose(data["gradient"][key], imp.gradient[key], rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(data["prune"], np.array(imp.prune) * 100, atol=1e-4)
    assert data["can_go"] == imp.can_go() and [tuple(o) for o in data["order"]] == imp.order
    assert [k["kind"] for k in data["kinds"]] == ["encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"]
    assert f"**{imp.can_go()} of 12 heads can go**" in data["text"]
    top = max((v, k, h) for k in imp.keys for h, v in enumerate(imp.drop[k]))
    assert f"`{top[1]}` head {top[2]}" in data["text"]


def test_scores_are_cached_per_model_scaling_and_ablation_not_per_text_or_heads_off(views):
    a = views.heads.importance(settings(views.runs), "zero")
    assert views.heads.importance(settings(views.runs, text="other", off="encoder.0.self_attn: 0"), None) is a
    assert views.heads.importance(settings(views.runs, scale="none"), "zero") is not a
    mean = views.heads.importance(settings(views.runs), "mean")
    assert mean["ablation"] == "mean" and "(mean ablation)" in mean["text"]
    with pytest.raises(ValueError, match="ablation must be one of"):
        views.heads.importance(settings(views.runs), "half")


def test_the_csv_holds_every_head(views):
    path = views.heads.csv_file(settings(views.runs), "zero")
    lines = open(path, encoding="utf-8").read().splitlines()
    assert lines[0].startswith("# Which heads matter: reverse (trained with 1/√d_k), d_k = 16 on ")  # the picker's
    assert lines[2] == "key,head,exact_match_lost,loss_rise,gradient,prune_rank"
    assert len(lines) == 3 + 12 and path.endswith("/reverse-trained-with-1-sqrtd_k-d_k-16__head_importance_zero.csv")


def test_the_payload_and_the_csv_say_the_scaling_they_were_scored_with(views):
    """The scores depend on the scaling (cached per scaling): the payload and the CSV say which one, so a CSV scored
    at a custom factor or without 1/√d_k never reads as one scored as the model was trained."""
    for scale, words in (("sqrt_dk", "×1/√16 = 0.25"), ("none", "unscaled")):
        s = settings(views.runs, scale=scale)
        assert views.heads.importance(s, "zero")["scaling"] == words
        lines = open(views.heads.csv_file(s, "zero"), encoding="utf-8").read().splitlines()
        assert lines[1].startswith(f"# ablation: zero; scaling: {words}; texts: {IMPORTANCE_STRINGS}; "), lines[1]
    custom = views.runs.settings("hello", "reverse/sqrt_dk", 16, "custom", 100.0, True, True, 0, 64, 4)
    assert views.heads.importance(custom, "zero")["scaling"] == "×100 (custom)"


def test_the_untrained_model_is_refused_with_the_reason(views):
    s = views.runs.settings("hello", "untrained", 16)
    with pytest.raises(ValueError, match="no task to score its heads on"):
        views.heads.importance(s)


def test_a_real_models_scores_stream_in_order_and_end_with_the_payload(real_views, monkeypatch):
    """Partial payloads a chunk of variants at a time (5 here), in order: the grid fills in (each number told is
    the payload's), then the gradient and the prune curve come; the last is the payload, equal to one scored
    without streaming, and then cached: a repeat is that one payload at once."""
    monkeypatch.setattr(heads_view, "REAL_CHUNK", 5)
    s = real_views.runs.settings("the cat sat on the mat", "hub:tiny-marian", 8, "sqrt_dk", 1.0, True, True, 0, 32, 4)
    *partials, last = list(real_views.heads.stream(s, "zero"))
    unstreamed = HeadsView(real_views.runs, real_views.exports).importance(s, "zero")
    assert last == unstreamed and "progress" not in last and last["total"] == 24
    assert len(partials) == 5 + 1 + 5  # 25 grid variants, the gradient, 22 prune curve variants: 5 a pass
    grid = [p for p in partials if p["progress"]["curve"] is None]
    assert [p["progress"]["done"] for p in grid] == [4, 9, 14, 19, 24] and grid == partials[:5]
    assert grid[0]["text"].startswith("Scored 4 of 24 heads, each switched off alone (zero ablation)")
    heads = [(key, h) for key in last["drop"] for h in range(4)]
    scored = set()
    for p in partials:
        assert p["format"] == "attention_viz.importance/1" and p.keys() == last.keys() | {"progress"}
        assert p["progress"]["total"] == 24 and p["baseline"] == last["baseline"] and p["title"] == last["title"]
        now = {(key, h) for key, h in heads if p["drop"][key][h] is not None}
        assert now >= scored and len(now) == p["progress"]["done"]  # grows, never loses a head
        assert all(p["drop"][key][h] == last["drop"][key][h] for key, h in now)
        scored = now
    curve = partials[5:]
    assert all(p["gradient"] == last["gradient"] for p in curve) and all(
        v is None for p in grid for values in p["gradient"].values() for v in values)
    assert [p["progress"]["curve"]["done"] for p in curve] == [2, 7, 12, 17, 22, 24]
    assert all(p["prune"] == last["prune"][: len(p["prune"])] for p in curve)
    assert curve[0]["text"] == "Every head scored; the prune curve: 2 of 24 points."
    again = list(real_views.heads.stream(s, "zero"))
    assert len(again) == 1 and again[0] is last and real_views.heads.importance(s, "zero") is last


def test_a_stream_refuses_at_once_and_tells_a_failure_after_what_it_told(real_views, views, monkeypatch):
    """Our models and cached scores are one payload; a refusal is raised before anything is told; a failure on
    the way comes after the partial payloads told before it."""
    ours = list(views.heads.stream(settings(views.runs), "zero"))
    assert len(ours) == 1 and ours[0] is views.heads.importance(settings(views.runs), "zero")
    with pytest.raises(ValueError, match="no task to score its heads on"):
        next(views.heads.stream(views.runs.settings("hello", "untrained", 16)))

    def failing(model, texts, partial=None, **options):
        partial(heads_view.RealPartial(model.map_keys, 4, 1, "zero", -1.0, {k: np.full(4, np.nan) for k in
                                                                             model.map_keys}, 0))
        raise ValueError("the real models are busy")

    monkeypatch.setattr(hub_model, "real_head_importance", failing)  # the real model's scoring
    s = real_views.runs.settings("a text never scored", "hub:tiny-marian", 8, "sqrt_dk", 1.0, True, True, 0, 32, 4)
    stream = real_views.heads.stream(s, "mean")
    assert next(stream)["progress"] == {"done": 0, "total": 24, "curve": None}
    with pytest.raises(ValueError, match="busy"):
        next(stream)


def test_a_real_model_is_scored_as_it_was_trained_and_says_so(real_views):
    """A real model's scoring passes take no switches: its scores with the scaling off are its scores as trained, and
    the payload names the scaling they were computed with (not the one on the controls)."""
    runs = real_views.runs
    scaled = runs.settings("the cat sat", "hub:tiny-marian", 64)
    unscaled = runs.settings("the cat sat", "hub:tiny-marian", 64, "none")
    a, b = real_views.heads.importance(scaled), real_views.heads.importance(unscaled)
    assert b is a  # one computation, cached once
    assert a["scaling"] == scaling_text(scaled) and "√" in a["scaling"]
