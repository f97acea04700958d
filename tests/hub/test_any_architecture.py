"""The package's functions on architectures found by the probe rather than listed: footnote 4's statistics, head
importance, what flows, the notebook view, pattern scores and the long pass, on tiny offline models of Gemma 2 (a
soft cap), Qwen3 (q/k norms), gpt-oss and Granite-SWA (learned sinks, in eager maps of either convention),
DeepSeek-V3 (values narrower than queries), ModernBERT (an encoder with local layers) and NLLB-MoE (an
encoder-decoder of experts, whose decoder reads router logits off the encoder's output) and Falcon (outside the
interface, routed through it by hub.routes). Each number is checked
against the model's own maps, not only for existing."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

import attention_viz as av  # noqa: E402
from attention_viz.explorer.pack import unpack  # noqa: E402
from attention_viz.hub import PretrainedTransformer  # noqa: E402
from attention_viz.hub.long import LongRunError  # noqa: E402
from attention_viz.importance import real_head_importance  # noqa: E402
from attention_viz.qkstats import qk_statistics  # noqa: E402
from devtools import tiny_archs  # noqa: E402

KINDS = ["gemma2", "qwen3", "gpt_oss", "granite_swa", "deepseek_v3", "modernbert", "nllb-moe", "falcon"]
TEXT = "the cat sat on the mat and the dog"


@pytest.fixture(scope="module", params=KINDS)
def model(request):
    hf, tokenizer = tiny_archs.tiny(request.param)
    return PretrainedTransformer(hf.float(), tokenizer, name=request.param)


def test_footnote4s_statistics_cover_every_head_and_their_entropies_are_entropies(model):
    stats = qk_statistics(model, [TEXT])
    assert list(stats) == [k for k in model.map_keys if k in stats] and stats
    for s in stats.values():
        assert s.logit_var.shape == (model.n_heads,) and np.isfinite(s.logit_var).all()
        for entropy in (s.entropy_scaled, s.entropy_unscaled):  # a row over at most 20 keys: 0 <= H <= log 20
            assert (entropy >= -1e-6).all() and (entropy <= math.log(20) + 1e-6).all()


def test_head_importance_scores_every_head_of_a_model_that_writes(model):
    if not model.abilities.writes_text:
        pytest.skip(f"{model.name} writes no text: importance is scored on a model's own output")
    result = real_head_importance(model, [TEXT], max_new_tokens=3)
    assert result.keys == model.map_keys and len(result.order) == len(model.map_keys) * model.n_heads
    assert all(d.shape == (model.n_heads,) and np.isfinite(d).all() for d in result.drop.values())
    assert np.isfinite(result.baseline) and result.baseline <= 0  # a mean log-probability


def test_the_notebook_view_names_every_map_and_pattern_scores_are_shares(model):
    view = av.show(model, TEXT)
    assert f"Our Eq. 1 inside it: {model.fidelity}." in view.payload["notes"]
    maps, _ = unpack(view.payload)
    assert set(maps) == set(model.map_keys)
    sinks = "s_aux" in model.fidelity.honoured
    for weights in maps.values():  # [H, Q, K]: every row of text sums to 1, less its sink's share where it has one
        rows = weights.sum(-1)
        assert (rows <= 1 + 1e-3).all() and (rows > 0).all() and (sinks or np.allclose(rows, 1, atol=1e-3))
    scores = av.pattern_scores(model, n=6)
    values = np.concatenate([v.ravel() for by in scores.scores.values() for v in by.values()])
    values = values[~np.isnan(values)]
    assert values.size and (values >= -1e-6).all() and (values <= 1 + 1e-6).all()


def test_the_long_pass_equals_the_forward_maps_or_names_what_it_does_not_cover(model):
    ids = model.encode(TEXT).ids[None]  # (1, T)
    both = model.layout == "encoder-decoder"  # its encoder reads the text: the encoder's maps of a forward pass
    start = (torch.tensor([[model.start_id]]),) if both else ()
    _, maps = model.forward(ids, *start, attention_mask=torch.ones_like(ids))
    try:
        run = model.long_run(ids)
    except LongRunError as refusal:  # soft caps and sinks: said by name
        assert model.fidelity.honoured and any(w in str(refusal) for w in ("soft", "sink", "s_aux")), refusal
        return
    try:
        assert run.keys == [key for key in model.map_keys if not both or key.startswith("encoder.")]
        for key in run.keys:
            weights = maps[key][0].detach().double()  # (H, T, T)
            first = weights[..., 0].mean(-1).numpy()  # (H,): the sink's mean weight
            np.testing.assert_allclose(run.summaries[key]["first_token"], first, atol=1e-5)
            T = weights.size(-1)
            region = run.region(key, 1, slice(0, T), slice(0, T))
            np.testing.assert_allclose(region, weights[1].numpy(), atol=1e-5)
    finally:
        run.close()
