"""Views.steps and Views.compare: numbers, not pictures. The panels are core's attention_steps for the head, the
softmax rows sum to 1, masked scores are −∞ and then exactly 0, a comparison's difference is a − b, and every
answer is plain JSON (no NaN, no Infinity)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attention_viz.core.attention import attention_steps
from attention_viz.core.maps import KINDS
from attention_viz.explorer.steps import (
    COMPARE_FORMAT,
    STEPS_FORMAT,
    compare_arrays,
    numbers,
    pack_compare,
    pack_steps,
    steps_arrays,
)
from attention_viz.service.limits import UNTRAINED
from tests.service.conftest import own


def core_steps(runs, settings, kind, layer, head) -> dict[str, np.ndarray]:
    """attention_steps of one head, on the inputs forward gives that attention (independently of Runs.steps)."""
    run = runs.run(settings)
    model, _ = own(runs, settings)
    src, tgt = torch.tensor([run.src_ids]), torch.tensor([run.tgt_ids])
    with torch.inference_mode():
        query, key, value, mask = model.attention_inputs(src, tgt, kind, layer, scale=settings.scale,
                                                         causal_mask=settings.causal_mask,
                                                         padding_mask=settings.padding_mask)
        q, k, v = model.attention_module(kind, layer).project(query, key, value)  # (1, H, Q, d_k), ...
        head_mask = None if mask is None else torch.broadcast_to(mask, (1, q.size(1), q.size(2), k.size(2)))[0, head]
        steps = attention_steps(q[0, head], k[0, head], v[0, head], head_mask, settings.scale)
    return {name: t.float().numpy() for name, t in steps.items()}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("model, switches", [
    ("reverse/sqrt_dk", dict(pad_tokens=2)),
    (UNTRAINED, dict(scale_mode="custom", custom_factor=0.3, pad_tokens=3)),
    ("copy/none", dict(causal_mask=False, padding_mask=False, pad_tokens=1)),
])
def test_the_panels_are_cores_steps_for_the_head(views, runs, kind, model, switches):
    settings = runs.settings("steps", model, 16, **switches)
    run = runs.run(settings)
    payload, text = views.steps(settings, kind, 1, 1)
    json.dumps(payload, allow_nan=False)  # plain JSON, as the API sends it
    assert payload["format"] == STEPS_FORMAT and payload["text"] == text
    assert (payload["kind"], payload["layer"], payload["head"]) == (kind, 1, 1)
    assert (payload["queries"], payload["keys"]) == run.tokens(kind)
    assert [p["name"] for p in payload["panels"]] == ["QKᵀ", "scaled", "masked", "softmax", "weights·V"]
    assert payload["d_k"] == 16 and payload["factor"] == runs.steps(settings, kind, 1, 1).factor
    assert payload["settings"]["text"] == "steps"
    arrays, expected = steps_arrays(payload), core_steps(runs, settings, kind, 1, 1)
    for name, array in expected.items():  # the shortest decimals read back as the very float32s
        np.testing.assert_array_equal(arrays[name], array, err_msg=name)
    np.testing.assert_array_equal(arrays["mask"], run.mask(kind))
    assert payload["d_v"] == expected["output"].shape[1]


def test_the_steps_asked_again_are_the_kept_answer_and_equal_a_fresh_one(views, runs, monkeypatch):
    """A student opens one run's steps again and again: the kept answer, computed once, the same as a fresh one
    (the same head named as sent or as parsed is one answer; another head is another)."""
    from attention_viz.service.runs import Runs
    from attention_viz.service.views import Views

    settings = runs.settings("kept", "reverse/sqrt_dk", 16)
    first = views.steps(settings, "encoder.self_attn", 1, 1)
    computed, original = [], Runs.steps
    monkeypatch.setattr(Runs, "steps", lambda self, *args: computed.append(args) or original(self, *args))
    assert views.steps(settings, "encoder.self_attn", 1.0, 1.0) == first and computed == []
    assert views.steps(settings, "encoder.self_attn", 1, 1) is first and computed == []
    other = views.steps(settings, "encoder.self_attn", 1, 0)
    assert len(computed) == 1 and other != first
    fresh = Views(runs).steps(settings, "encoder.self_attn", 1, 1)
    assert json.dumps(fresh, allow_nan=False) == json.dumps(first, allow_nan=False)


def test_softmax_rows_sum_to_one_and_masked_scores_are_minus_infinity_then_exactly_zero(views, runs):
    settings = runs.settings("hello", UNTRAINED, 16, pad_tokens=3)
    for kind in KINDS:
        payload, text = views.steps(settings, kind, 0, 2)
        arrays, allowed = steps_arrays(payload), np.array(payload["mask"])
        masked = next(p["values"] for p in payload["panels"] if p["key"] == "masked")
        assert all((value is None) == (not ok) for row, oks in zip(masked, allowed) for value, ok in zip(row, oks))
        assert (np.isneginf(arrays["masked"]) == ~allowed).all() and (~allowed).any()
        assert (arrays["weights"][~allowed] == 0).all()  # exactly 0, not small
        np.testing.assert_allclose(arrays["weights"].sum(axis=1), 1.0, atol=1e-6)
        np.testing.assert_allclose(arrays["scaled"], arrays["scores"] * payload["factor"], rtol=1e-6)
        assert f"{int((~allowed).sum())} of {allowed.size} scores set to −∞" in text
    assert views.steps(settings, "decoder.self_attn", 0, 0)[0]["mask"][0][1] is False  # the causal mask


@pytest.mark.parametrize("what, kind", [("scaling", "decoder.cross_attn"), ("causal_mask", "decoder.self_attn"),
                                        ("padding_mask", "encoder.self_attn")])
def test_compare_difference_is_a_minus_b(views, runs, what, kind):
    settings = runs.settings("masks", UNTRAINED, 16, pad_tokens=2)
    payload, text = views.compare(settings, what, kind, 1, 1)
    json.dumps(payload, allow_nan=False)
    comparison = runs.compare(settings, what, kind, 1, 1)
    arrays = compare_arrays(payload)
    assert payload["format"] == COMPARE_FORMAT and payload["comparison"] == what and payload["text"] == text
    np.testing.assert_array_equal(arrays["a"], comparison.a)
    np.testing.assert_array_equal(arrays["b"], comparison.b)
    np.testing.assert_array_equal(arrays["difference"], arrays["a"] - arrays["b"])  # float32, exactly
    assert payload["labels"] == list(comparison.labels) and payload["outputs"] == list(comparison.outputs)
    np.testing.assert_array_equal(arrays["mask_a"], comparison.masks[0])
    size = np.abs(arrays["difference"])
    largest = payload["largest"]
    assert size[largest["query"], largest["key"]] == size.max() > 0
    assert largest["value"] == arrays["difference"][largest["query"], largest["key"]]
    assert payload["mean_abs"] == pytest.approx(size.mean(), rel=1e-6)
    # the text's largest change has the sign of the table's (−0.956 there was "0.956" here)
    value = largest["value"]
    assert f"Largest change {'+' if value > 0 else '−'}{abs(value):.3f}:" in text
    if what == "causal_mask":  # on: the future hidden; off: nothing hidden
        assert not arrays["mask_a"][0, 1] and arrays["mask_b"].all()
    if what == "padding_mask":
        assert not arrays["mask_a"][:, -2:].any() and (arrays["a"][:, -2:] == 0).all()


def test_no_difference_has_no_largest_change(views, runs):
    settings = runs.settings("masks", UNTRAINED, 16)
    payload, text = views.compare(settings, "causal_mask", "encoder.self_attn", 0, 0)
    assert payload["largest"] is None and payload["mean_abs"] == 0
    assert "No difference in this head" in text and "encoder runs before the decoder" in text


def test_numbers_are_shortest_float32_decimals_and_refuse_what_json_cannot_hold():
    values = np.array([[0.1, 1 / 3, -2.5e-8, 1e20]], dtype=np.float32)
    rows = numbers(values)
    assert rows[0][0] == 0.1 and json.dumps(rows[0][0]) == "0.1"
    np.testing.assert_array_equal(np.array(rows, dtype=np.float32), values)
    assert numbers(np.array([[-np.inf, 1.0]]), masked=np.array([[True, False]])) == [[None, 1.0]]
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="finite"):
            numbers(np.array([[bad, 1.0]]))


def test_the_packers_refuse_shapes_that_disagree():
    q, k = ["a", "b"], ["x", "y", "z"]
    steps = {name: np.zeros((2, 3), np.float32) for name in ("scores", "scaled", "masked", "weights")}
    steps["output"] = np.zeros((2, 4), np.float32)
    payload = pack_steps(steps, q, k, None, 4, 0.5, "×0.5 (custom)", "decoder.cross_attn", 0, 0)
    assert payload["d_v"] == 4 and payload["mask"] == [[True] * 3] * 2
    with pytest.raises(ValueError, match="−∞ exactly where"):
        pack_steps(steps, q, k, np.array([[True, False, True]] * 2), 4, 0.5, "", "decoder.cross_attn", 0, 0)
    with pytest.raises(ValueError, match="scores has shape"):
        pack_steps({**steps, "scores": np.zeros((3, 3))}, q, k, None, 4, 0.5, "", "decoder.cross_attn", 0, 0)
    with pytest.raises(ValueError, match="unknown attention kind"):
        pack_steps(steps, q, k, None, 4, 0.5, "", "cross", 0, 0)
    with pytest.raises(ValueError, match="expected"):
        pack_compare(np.zeros((2, 3)), np.zeros((3, 2)), q, k, "scaling", ("on", "off"), ("", ""),
                     "decoder.cross_attn", 0, 0)
