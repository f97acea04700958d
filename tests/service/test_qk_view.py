"""The lab's "this model's own q·k" (service.qk_view.OwnQK): the head's numbers are qkstats' on the model's own texts,
the histogram counts that head's logits against lab.bin_probabilities at its d_k, one computation per model, and
every bad input is refused with a message."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_viz import lab
from attention_viz.data.tasks import heldout_strings
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.qkstats import qk_statistics
from attention_viz.service.catalog import Catalog
from attention_viz.service.qk_view import OWN_TEXTS, OwnQK


@pytest.fixture(scope="module")
def own(one_thread):
    return OwnQK(Catalog())


def test_the_picker_offers_every_dot_product_checkpoint_and_no_additive_one(own):
    values = [value for _, value in own.choices]
    catalog = own.catalog
    assert {"reverse", "reverse_dk128_unscaled", "copy", "sort", "dates"} <= set(values)
    assert all(catalog.cards[v]["config"].get("compatibility", "dot_product") == "dot_product" for v in values)
    assert own.default_model == "reverse"


@pytest.mark.parametrize("name, kind, layer, head, scaled", [
    ("reverse_dk64_unscaled", "decoder.cross_attn", 1, 3, False), ("reverse", "encoder.self_attn", 0, 1, True)])
def test_a_heads_numbers_and_histogram_are_its_own_logits(own, name, kind, layer, head, scaled):
    data = own.view(name, kind, str(layer), float(head), scaled)  # values as a raw request sends them
    model, card = own.catalog.trained(name)
    texts = heldout_strings(card["max_len"], OWN_TEXTS, task=card["task"])
    stats = qk_statistics(model, texts, tokenizer=CharTokenizer(max_len=card["max_len"]), scale=card["scale"],
                          keep_logits=True)
    stack, name_ = kind.split(".")
    s = stats[f"{stack}.{layer}.{name_}"]
    rows = {row[0]: row[1] for row in data["numbers"]["data"]}
    assert rows["Var q·k, raw"] == pytest.approx(s.logit_var[head], rel=1e-3)
    assert rows["d_k · Var q · Var k"] == pytest.approx(s.d_k * s.q_var[head] * s.k_var[head], rel=1e-3)
    assert rows["Var q·k / (d_k · Var q · Var k)"] == pytest.approx(s.ratio[head], rel=1e-3)
    assert rows["softmax entropy with 1/√d_k, nats"] == pytest.approx(s.entropy_scaled[head], rel=1e-3)
    assert rows["softmax entropy without scaling, nats"] == pytest.approx(s.entropy_unscaled[head], rel=1e-3)
    assert rows["pairs (query, key) pooled"] == s.n_pairs
    h = data["histogram"]
    values = s.logits[head].astype(np.float64) / (math.sqrt(s.d_k) if scaled else 1.0)
    edges = np.array(h["edges"])
    assert h["counts"] == np.histogram(values, bins=edges)[0].tolist()
    assert sum(h["counts"]) + h["below"] + h["above"] == h["samples"] == s.n_pairs
    np.testing.assert_allclose(h["theory"], lab.bin_probabilities(edges, s.d_k, scaled)[0], rtol=1e-4, atol=1e-12)
    assert h["theory_variance"] == (1.0 if scaled else s.d_k)
    assert edges[-1] >= 5 * math.sqrt(h["theory_variance"]) * (1 - 1e-6)  # the law fits on the axis
    assert h["variance"] == pytest.approx(values.var(), rel=1e-3)
    assert (data["d_k"], data["key"], data["head"], data["scaled"]) == (s.d_k, f"{stack}.{layer}.{name_}", head, scaled)


def test_a_model_is_measured_once(one_thread):
    own = OwnQK(Catalog())
    first = {(head, scaled): own.view("copy", "decoder.self_attn", 1, head, scaled)
             for head in range(4) for scaled in (True, False)}
    info = own.cache_info()
    # each new view asks three times: the model's shape to check the values, its shape and the head's for the answer
    assert (info.misses, info.hits) == (1, 3 * 8 - 1)
    for (head, scaled), view in first.items():  # asked again: the kept answer (the values checked again)
        assert own.view("copy", "decoder.self_attn", 1.0, head, scaled) is view
    assert own.cache_info().hits == 3 * 8 - 1 + 8
    assert OwnQK(Catalog()).view("copy", "decoder.self_attn", 1, 3, False) == first[(3, False)]  # a fresh one


@pytest.mark.parametrize("args, message", [
    (("nope", "encoder.self_attn", 0, 0, True), "Unknown model 'nope'"),
    (("reverse_additive_dk1024", "encoder.self_attn", 0, 0, True), "Unknown model"),
    (("reverse", "decoder.attn", 0, 0, True), "attention"),
    (("reverse", "encoder.self_attn", 2, 0, True), "layer"),
    (("reverse", "encoder.self_attn", 0, 4, True), "head"),
    (("reverse", "encoder.self_attn", "x", 0, True), "layer"),
    (("reverse", "encoder.self_attn", 0, float("nan"), True), "head"),
])
def test_bad_inputs_are_refused_with_a_message(own, args, message):
    with pytest.raises(ValueError, match=message):
        own.view(*args)
