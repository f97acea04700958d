"""Head importance (attention_viz.importance) on the shipped reverse model: the batched grid equals each head
switched off in a run of its own, the gradient estimate equals per-string gradients, the prune curve equals its
own switch sets; bad inputs refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attention_viz as av
from attention_viz.core.ablation import mean_outputs
from attention_viz.core.variation import Variation
from attention_viz.data.tasks import heldout_strings, make_batch, target
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.importance import head_importance, michel, spearman

N = 24  # held-out strings: enough to see drops, quick


@pytest.fixture(scope="module")
def shipped():
    model, card = av.load_model("reverse")
    tokenizer = CharTokenizer(max_len=card["max_len"])
    texts = heldout_strings(card["max_len"], N, task="reverse")
    return model, tokenizer, texts


@pytest.fixture(scope="module")
def importance(shipped):
    model, tokenizer, texts = shipped
    return head_importance(model, "reverse", texts, tokenizer=tokenizer)


def alone(model, tokenizer, texts, heads_off, **options):
    """(exact match, mean loss per token) with these heads off, in a run of its own."""
    batch = make_batch(texts, "reverse", tokenizer)
    with torch.no_grad():
        tokens, _ = model.greedy_decode(batch.src, tokenizer.max_len + 1, heads_off=heads_off, **options)
        logits, _ = model(batch.src, batch.tgt_in, heads_off=heads_off, **options)
    exact = np.mean([tokenizer.decode(row) == target("reverse", t) for row, t in zip(tokens.tolist(), texts)])
    losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch.tgt_out, ignore_index=tokenizer.pad_id,
                                               reduction="none")
    real = (batch.tgt_out != tokenizer.pad_id).float()
    return exact, float((losses * real).sum() / real.sum())


def test_each_heads_drop_and_loss_rise_equal_a_run_with_that_head_alone_off(shipped, importance):
    model, tokenizer, texts = shipped
    base_exact, base_loss = alone(model, tokenizer, texts, None)
    assert importance.baseline == pytest.approx(base_exact) and importance.baseline_loss == pytest.approx(base_loss)
    for key, h in [("encoder.0.self_attn", 0), ("decoder.0.cross_attn", 2), ("decoder.1.self_attn", 3),
                   ("encoder.1.self_attn", 1)]:
        exact, loss = alone(model, tokenizer, texts, {key: [h]})
        assert importance.drop[key][h] == pytest.approx(base_exact - exact, abs=1e-12), (key, h)
        assert importance.loss_rise[key][h] == pytest.approx(loss - base_loss, rel=1e-4, abs=1e-6), (key, h)
    assert max(d.max() for d in importance.drop.values()) > 0  # some head matters


def test_the_gradient_estimate_is_the_mean_of_each_strings_own_gradient(shipped, importance):
    model, tokenizer, texts = shipped
    few = texts[:3]
    batch = make_batch(few, "reverse", tokenizer)
    together = michel(model, batch, tokenizer, importance.keys, importance.n_heads, Variation(), None)
    single = []
    for text in few:  # one backward pass per string: |∂L(x)/∂ξ|, then the mean over the strings
        one = make_batch([text], "reverse", tokenizer)
        single.append(michel(model, one, tokenizer, importance.keys, importance.n_heads, Variation(), None))
    for key in importance.keys:
        np.testing.assert_allclose(together[key], np.mean([s[key] for s in single], 0), rtol=1e-4, atol=1e-9)


def test_the_prune_curve_follows_its_order_and_says_how_many_can_go(shipped, importance):
    model, tokenizer, texts = shipped
    assert len(importance.prune) == importance.total and importance.prune[0] == importance.baseline
    for k in (1, 4, 9):
        off: dict[str, list[int]] = {}
        for key, h in importance.order[:k]:
            off.setdefault(key, []).append(h)
        exact, _ = alone(model, tokenizer, texts, off)
        assert importance.prune[k] == pytest.approx(exact, abs=1e-12), k
    drops = [importance.drop[key][h] for key, h in importance.order]
    assert drops == sorted(drops)  # least important first
    can = importance.can_go()
    assert all(em >= importance.baseline - 0.01 - 1e-12 for em in importance.prune[can:can + 1])
    assert 0 <= can < importance.total and -1 <= importance.agreement <= 1


def test_mean_ablation_importance_equals_a_mean_ablated_run(shipped):
    model, tokenizer, texts = shipped
    imp = head_importance(model, "reverse", texts[:12], tokenizer=tokenizer, ablation="mean")
    batch = make_batch(texts[:12], "reverse", tokenizer)
    with torch.no_grad():
        outputs = model.head_outputs(batch.src, batch.tgt_in)
    query_masks = {key: (batch.src if key.startswith("encoder") else batch.tgt_in) != tokenizer.pad_id
                   for key in outputs}
    means = mean_outputs(outputs, query_masks)
    base, _ = alone(model, tokenizer, texts[:12], None)
    exact, _ = alone(model, tokenizer, texts[:12], {"decoder.0.cross_attn": [1]}, ablation="mean", head_means=means)
    assert imp.drop["decoder.0.cross_attn"][1] == pytest.approx(base - exact, abs=1e-12)


def test_spearman_on_known_rankings():
    assert spearman(np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])) == pytest.approx(1.0)
    assert spearman(np.array([1, 2, 3, 4]), np.array([4, 3, 2, 1])) == pytest.approx(-1.0)
    assert spearman(np.array([1, 1, 2]), np.array([5, 5, 9])) == pytest.approx(1.0)  # ties share their rank
    assert np.isnan(spearman(np.array([1, 1, 1]), np.array([1, 2, 3])))


def test_bad_arguments_are_refused(shipped):
    model, tokenizer, texts = shipped
    with pytest.raises(ValueError, match="ablation must be one of"):
        head_importance(model, "reverse", texts, tokenizer=tokenizer, ablation="half")
    with pytest.raises(ValueError, match="at least one text"):
        head_importance(model, "reverse", [], tokenizer=tokenizer)


def test_one_of_our_models_needs_its_task(shipped):
    model, tokenizer, texts = shipped
    with pytest.raises(ValueError, match="needs the task"):
        av.head_importance(model, texts=texts)


# ----------------------------------------------------------------------------- fast.logprob (real models' scores)

@pytest.mark.parametrize("block", [1, 7, 64, 1000, 4096])  # 1000 rows: one block; 7, 64 do not divide it
@pytest.mark.parametrize("with_bias", [True, False])
def test_target_log_probs_equal_the_log_softmax_of_the_logits(block, with_bias):
    from attention_viz.fast.logprob import target_log_probs

    generator = torch.Generator().manual_seed(block)
    R, D, V = 37, 19, 1000
    hidden = torch.randn(R, D, generator=generator, dtype=torch.float64) * 3
    weight = torch.randn(V, D, generator=generator, dtype=torch.float64)
    bias = torch.randn(V, generator=generator, dtype=torch.float64) * 5 if with_bias else None
    targets = torch.randint(0, V, (R,), generator=generator)
    targets[0], targets[1] = 0, V - 1  # the first and the last of the vocabulary
    logits = hidden @ weight.T + (bias if with_bias else 0)  # (R, V)
    expected = torch.log_softmax(logits, -1).gather(-1, targets[:, None])[:, 0]
    np.testing.assert_allclose(target_log_probs(hidden, targets, weight, bias, block), expected, rtol=0, atol=1e-12)


def test_target_log_probs_are_stable_where_the_largest_logit_is_far_from_the_first_block():
    """Logits of hundreds of nats, their largest in the last block: each block's log-sum-exp is shifted by its own
    maximum and the blocks are combined the same way, so nothing overflows (float32, as the scores run)."""
    from attention_viz.fast.logprob import target_log_probs

    generator = torch.Generator().manual_seed(0)
    R, D, V = 5, 8, 300
    hidden = torch.randn(R, D, generator=generator)
    weight = torch.randn(V, D, generator=generator)
    bias = torch.zeros(V)
    bias[-3] = 400.0  # far above the rest: exp would overflow float32 unshifted
    targets = torch.tensor([V - 3, 0, 17, V - 1, V - 3])
    got = target_log_probs(hidden, targets, weight, bias, block=64)
    expected = torch.log_softmax(hidden.double() @ weight.double().T + bias.double(), -1)
    expected = expected.gather(-1, targets[:, None])[:, 0]
    assert torch.isfinite(got).all()
    np.testing.assert_allclose(got.double(), expected, rtol=1e-6, atol=1e-4)
