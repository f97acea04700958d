"""Head importance of real models (attention_viz.importance.real_head_importance): the batched grid (padded texts,
per-row gates) equals each head switched off in a pass of its own; the gradient estimate is the mean of each
text's own; the prune curve follows its order; bad calls refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from attention_viz.hub import load_pretrained  # noqa: E402
from attention_viz.importance import _own_outputs, _real_michel, real_head_importance  # noqa: E402

TEXTS = ["the cat sat on the mat", "attention is all you need", "hello"]


def own_logprob(model, texts, heads_off=None, **options) -> float:
    """Mean log-probability per token of the model's own greedy output (all heads on), text by text, with these
    heads off: the reference, one text and one pass at a time."""
    total, count = 0.0, 0
    for text in texts:
        src = model.encode(text).ids[None]
        written, _ = model.greedy_decode(src, 5)
        w = written[0]
        with torch.no_grad():
            if model.layout == "encoder-decoder":
                decoder = torch.cat([torch.tensor([model.start_id]), w[:-1]])[None]
                logits, _ = model.forward(src, decoder, heads_off=heads_off, **options)
                logp = torch.log_softmax(logits[0].double(), -1)[torch.arange(len(w)), w]
            else:
                sequence = torch.cat([src[0], w[:-1]])[None]
                logits, _ = model.forward(sequence, heads_off=heads_off, **options)
                positions = torch.arange(src.size(1) - 1, src.size(1) - 1 + len(w))
                logp = torch.log_softmax(logits[0].double(), -1)[positions, w]
        total += float(logp.sum())
        count += len(w)
    return total / count


@pytest.mark.parametrize("family", ["marian", "llama"])
def test_the_batched_grid_and_prune_curve_equal_passes_of_their_own(tiny_folders, family):
    model = load_pretrained(tiny_folders[family], dtype=torch.float64)
    imp = real_head_importance(model, TEXTS, max_new_tokens=5, chunk=16)
    base = own_logprob(model, TEXTS)
    assert imp.baseline == pytest.approx(base, abs=1e-9) and imp.prune[0] == pytest.approx(base, abs=1e-9)
    for key, h in [(imp.keys[0], 1), (imp.keys[-1], 3), (imp.keys[len(imp.keys) // 2], 0)]:
        assert imp.drop[key][h] == pytest.approx(base - own_logprob(model, TEXTS, {key: [h]}), abs=1e-9), (key, h)
    for k in (2, 5):
        off: dict[str, list[int]] = {}
        for key, h in imp.order[:k]:
            off.setdefault(key, []).append(h)
        assert imp.prune[k] == pytest.approx(own_logprob(model, TEXTS, off), abs=1e-9), k
    assert len(imp.prune) == imp.total and -1 <= imp.agreement <= 1 or np.isnan(imp.agreement)


def test_the_gradient_estimate_is_the_mean_of_each_texts_own(tiny_folders):
    model = load_pretrained(tiny_folders["marian"], dtype=torch.float64)
    keys = model.map_keys
    together = _real_michel(model, *_own_outputs(model, TEXTS, 5), keys, "zero", None)
    single = [_real_michel(model, *_own_outputs(model, [text], 5), keys, "zero", None) for text in TEXTS]
    for key in keys:
        np.testing.assert_allclose(together[key], np.mean([s[key] for s in single], 0), rtol=1e-7, atol=1e-12)


def test_mean_ablation_and_bad_calls(tiny_folders):
    model = load_pretrained(tiny_folders["llama"])
    imp = real_head_importance(model, TEXTS[:2], ablation="mean", max_new_tokens=4)
    assert imp.ablation == "mean" and imp.total == 8
    with pytest.raises(ValueError, match="ablation must be one of"):
        real_head_importance(model, TEXTS, ablation="half")
    with pytest.raises(ValueError, match="at least one text"):
        real_head_importance(model, [])
    with pytest.raises(ValueError, match="encoder only"):
        real_head_importance(load_pretrained(tiny_folders["bert"]), TEXTS)


def test_head_importance_of_a_real_model_needs_no_task(tiny_folders):
    import attention_viz as av

    model = load_pretrained(tiny_folders["gpt2"])
    imp = av.head_importance(model, texts=TEXTS[:2])
    assert imp.total == 8 and imp.texts == 2 and len(imp.prune) == 8
