"""Head importance of real models (attention_viz.importance.real_head_importance): the batched grid (padded texts,
per-row gates) equals each head switched off in a pass of its own; the gradient estimate is the mean of each
text's own; the prune curve follows its order and reuses the grid's first two points; what is scored so far is told
after each chunk and changes nothing; the scores through the output head's blocks (fast.logprob) equal the logits'
log-softmax for every family that allows them, and a head not known to be linear takes the logits; bad calls
refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

import attention_viz.importance.real as importance  # noqa: E402
from attention_viz.core.variation import Variation  # noqa: E402
from attention_viz.fast import logprob  # noqa: E402
from attention_viz.hub import PretrainedTransformer, load_pretrained  # noqa: E402
from attention_viz.importance.real import _own_outputs, _real_michel, real_head_importance  # noqa: E402

TEXTS = ["the cat sat on the mat", "attention is all you need", "hello"]
LINEAR_HEADS = ("marian", "bart", "mbart", "gpt2", "llama", "qwen2")  # output_head: exactly h Wᵀ + b
BLOCK = 11  # vocabulary rows a block in these tests: divides none of the tiny vocabularies (120 .. 420)


def with_logits_bias(model):
    """The model with a random final_logits_bias where its family adds one (the tiny models' are all 0, which
    would hide a bias left out)."""
    bias = getattr(model.model, "final_logits_bias", None)
    if bias is not None:
        with torch.no_grad():
            bias.copy_(torch.randn(bias.shape, generator=torch.Generator().manual_seed(1), dtype=bias.dtype))
    return model


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
    together = _real_michel(model, *_own_outputs(model, TEXTS, 5), keys, Variation(), None)
    single = [_real_michel(model, *_own_outputs(model, [text], 5), keys, Variation(), None) for text in TEXTS]
    for key in keys:
        np.testing.assert_allclose(together[key], np.mean([s[key] for s in single], 0), rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("family", ["marian", "gpt2"])
def test_what_is_scored_so_far_is_told_after_each_chunk_and_changes_nothing(tiny_folders, family):
    """`partial` gets the grid a chunk at a time (the baseline first, then the heads in map-key order; NaN for
    those to come), then the gradient, then the prune curve a chunk at a time; the scores are bit for bit those of
    a call without it, and every number told is the final one."""
    model = load_pretrained(tiny_folders[family])
    told = []
    imp = real_head_importance(model, TEXTS, max_new_tokens=5, chunk=3 * 5, partial=told.append)  # 5 variants a pass
    plain = real_head_importance(model, TEXTS, max_new_tokens=5, chunk=3 * 5)
    assert (imp.baseline, imp.order, imp.prune, imp.agreement) == (plain.baseline, plain.order, plain.prune,
                                                                     plain.agreement)
    for key in imp.keys:
        np.testing.assert_array_equal(imp.drop[key], plain.drop[key])
        np.testing.assert_array_equal(imp.gradient[key], plain.gradient[key])
    n = imp.total
    grid = [part for part in told if part.gradient is None]
    curve = told[len(grid):]
    assert [part.done for part in grid] == [min(v, n + 1) - 1 for v in range(5, n + 6, 5)]  # 4, 9, ..., n
    final = np.concatenate([imp.drop[key] for key in imp.keys])  # heads in map-key order
    for part in told:
        assert part.baseline == imp.baseline and part.total == n and part.texts == 3 and part.ablation == "zero"
        drop = np.concatenate([part.drop[key] for key in imp.keys])
        np.testing.assert_array_equal(drop[: part.done], final[: part.done])
        assert np.isnan(drop[part.done:]).all()
    assert [len(part.prune) for part in curve] == [2] + [min(k, n) for k in range(7, n + 5, 5)]  # 2, 7, ..., n
    for part in curve:
        assert part.done == n and part.prune == imp.prune[: len(part.prune)]
        assert all(np.array_equal(part.gradient[key], imp.gradient[key]) for key in imp.keys)


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


def cut_last_output(model, ids, mask, decoder, targets, keep: int):
    """_own_outputs' rows with the last text's output cut to its first `keep` tokens, padded as _own_outputs pads
    a shorter output (the tiny models seldom stop early: rows of unequal outputs, made by hand)."""
    pad = model.pad_id if model.pad_id is not None else 0
    first = int((targets[-1] != -100).nonzero()[0, 0])  # the position that predicts the first written token
    targets[-1, first + keep:] = -100
    if decoder is not None:
        decoder[-1, keep:] = pad  # the start token and the first keep - 1 tokens
    else:
        ids[-1, first + keep:], mask[-1, first + keep:] = pad, 0  # the prompt and the first keep - 1 tokens
    return ids, mask, decoder, targets


@pytest.mark.parametrize("family", LINEAR_HEADS)
def test_the_fused_log_probabilities_equal_the_log_softmax_of_forwards_logits(tiny_folders, family, monkeypatch):
    """Padded rows, heads off in both stacks, a vocabulary that no block divides: log p(target) at the scored
    positions from the final hidden states and the output head's blocks equals forward's logits' log-softmax."""
    monkeypatch.setattr(logprob, "BLOCK", BLOCK)
    model = with_logits_bias(load_pretrained(tiny_folders[family], dtype=torch.float64))
    head = importance._linear_head(model)
    assert head is not None and head[0].size(0) % BLOCK != 0 and head[0].size(0) > 3 * BLOCK
    ids, mask, decoder, targets = cut_last_output(model, *_own_outputs(model, TEXTS, 5), keep=3)
    real = targets != -100
    assert not real.all() and (mask == 0).any() and real.sum(1).unique().numel() > 1  # padded rows
    keys = model.map_keys
    off = Variation(heads_off={keys[0]: [1], keys[-1]: [0, 2], keys[len(keys) // 2]: [3]})
    with torch.no_grad():
        logits = model.traced(ids, decoder, attention_mask=mask, variation=off).logits  # (N, T, V)
        expected = torch.log_softmax(logits, -1).gather(-1, targets.clamp_min(0)[..., None])[..., 0][real]
        got = importance._scored_logprobs(model, head, ids, mask, decoder, targets, None, off)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)
        if model.layout == "encoder-decoder":  # the decoder on the encoder's states, as the grid shares them
            encoded = importance.encoder_states(model, ids, attention_mask=mask, variation=off)
            got = importance._scored_logprobs(model, head, None, mask, decoder, targets, encoded, off)
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)
    unswitched = importance._scored_logprobs(model, head, ids, mask, decoder, targets, None)
    assert (unswitched - got).abs().max() > 1e-3  # the heads off changed what was measured


@pytest.mark.parametrize("family", ["marian", "bart", "gpt2", "llama"])
def test_real_head_importance_is_the_same_fused_and_from_the_logits(tiny_folders, family, monkeypatch):
    model = with_logits_bias(load_pretrained(tiny_folders[family]))  # float32, as the app runs
    fused_calls = []
    monkeypatch.setattr(importance, "target_log_probs",
                        lambda *a, **k: fused_calls.append(1) or logprob.target_log_probs(*a, **k))
    monkeypatch.setattr(logprob, "BLOCK", BLOCK)
    fused = real_head_importance(model, TEXTS, max_new_tokens=5, chunk=16)
    assert fused_calls  # the fast path ran
    monkeypatch.setattr(importance, "output_head", lambda model: None)  # the logits' log-softmax, as before
    calls = len(fused_calls)
    logits = real_head_importance(model, TEXTS, max_new_tokens=5, chunk=16)
    assert len(fused_calls) == calls
    assert fused.baseline == pytest.approx(logits.baseline, abs=1e-5)
    for key in fused.keys:
        np.testing.assert_allclose(fused.drop[key], logits.drop[key], rtol=0, atol=1e-5)
    assert fused.order == logits.order
    np.testing.assert_allclose(fused.prune, logits.prune, rtol=0, atol=1e-5)


def test_the_prune_curve_takes_its_first_two_points_from_the_grid(tiny_folders, monkeypatch):
    model = load_pretrained(tiny_folders["marian"])
    scored = []
    original = importance._real_scores
    monkeypatch.setattr(importance, "_real_scores", lambda *a, **k: scored.extend(a[6]) or original(*a, **k))
    imp = real_head_importance(model, TEXTS, max_new_tokens=5, chunk=16)
    variants = [frozenset(v) for v in scored]
    assert len(variants) == len(set(variants)) == 1 + imp.total + (imp.total - 2)  # nothing scored twice
    assert imp.prune[0] == imp.baseline
    assert imp.prune[1] == pytest.approx(imp.baseline - imp.drop[imp.order[0][0]][imp.order[0][1]], abs=1e-12)
    assert len(imp.prune) == imp.total


def test_an_output_head_not_known_to_be_linear_takes_the_logits(tiny_folders, monkeypatch):
    """BERT's masked-LM head (a transform and a norm), a hook on lm_head (a soft cap, as Gemma's logits have), a
    class of our own whose forward caps the logits, half-precision weights: no fused scores; with the hook, real
    importance still measures what forward computes."""
    import transformers

    assert importance.output_head(load_pretrained(tiny_folders["bert"])) is None
    assert importance._linear_head(load_pretrained(tiny_folders["gpt2"], dtype=torch.bfloat16)) is None
    llama = load_pretrained(tiny_folders["llama"])
    def capped(self, *args, **kwargs):
        out = transformers.LlamaForCausalLM.forward(self, *args, **kwargs)
        out.logits = 3.0 * torch.tanh(out.logits / 3.0)
        return out

    own_class = type("CappedLlama", (transformers.LlamaForCausalLM,), {"forward": capped})
    wrapped = own_class(llama.model.config)
    wrapped.load_state_dict(llama.model.state_dict())
    assert importance.output_head(PretrainedTransformer(wrapped, llama.tokenizer)) is None

    hooked = load_pretrained(tiny_folders["marian"])
    assert importance.output_head(hooked) is not None
    hooked.model.register_forward_hook(lambda module, args, out: out)  # may change the logits after lm_head
    assert importance.output_head(hooked) is None

    model = load_pretrained(tiny_folders["gpt2"], dtype=torch.float64)
    assert importance.output_head(model) is not None
    model.model.lm_head.register_forward_hook(lambda module, args, out: 3.0 * torch.tanh(out / 3.0))
    assert importance.output_head(model) is None
    monkeypatch.setattr(importance, "target_log_probs", lambda *a, **k: pytest.fail("the fused path ran"))
    imp = real_head_importance(model, TEXTS, max_new_tokens=5, chunk=16)
    assert imp.baseline == pytest.approx(own_logprob(model, TEXTS), abs=1e-9)
    key = model.map_keys[-1]
    assert imp.drop[key][1] == pytest.approx(own_logprob(model, TEXTS) - own_logprob(model, TEXTS, {key: [1]}),
                                             abs=1e-9)


def test_the_grids_first_pass_is_its_first_row(tiny_folders, monkeypatch):
    """The grid's first pass is the baseline and the first map key's heads (told first, the page's first row of
    cells), the encoder run for those only; the rest a chunk a pass, the prune curve a chunk a pass from its start."""
    model = load_pretrained(tiny_folders["marian"])
    encoder_rows = []
    original = importance.encoder_states
    monkeypatch.setattr(importance, "encoder_states",
                        lambda model, ids, **k: encoder_rows.append(ids.size(0)) or original(model, ids, **k))
    told = []
    imp = real_head_importance(model, TEXTS[:1], max_new_tokens=5, chunk=16, partial=told.append)
    H, n = imp.n_heads, imp.total  # 4 heads, 24 in all: the grid's 25 variants in passes of 5, 16 and 4
    grid = [part.done for part in told if part.gradient is None]
    assert grid == [H, H + 16, n]
    assert np.isfinite(told[0].drop[imp.keys[0]]).all() and np.isnan(told[0].drop[imp.keys[1]]).all()
    curve = [len(part.prune) for part in told if part.gradient is not None]
    assert curve == [2, 18, n]  # the prune curve's 22 variants: 16, then 6
    assert encoder_rows[:2] == [1 + H, H]  # the grid's: the baseline and encoder.0's heads, then encoder.1's
    told.clear()
    real_head_importance(model, TEXTS, max_new_tokens=5, chunk=3 * 16, first=3 * 2, partial=told.append)
    assert [part.done for part in told if part.gradient is None] == [1, 17, n]  # `first` rows: 2 variants of 3 texts


def test_a_texts_scores_are_the_same_on_every_call_and_near_a_float64_reference(tiny_folders):
    """In float32, as the app runs (REAL_CHUNK rows a pass, one text): a text's scores are bit for bit the same
    after another text's, with or without `partial`, and within 1e-5 nats of the same model's in float64 (its own
    greedy output the same) on every pass schedule: the app's, one chunk a pass, 8 rows a pass."""
    from attention_viz.service.heads_view import REAL_CHUNK

    model = load_pretrained(tiny_folders["marian"])
    wide = load_pretrained(tiny_folders["marian"], dtype=torch.float64)
    for text in TEXTS[:2]:
        assert torch.equal(_own_outputs(model, [text], 8)[2], _own_outputs(wide, [text], 8)[2])
    first = real_head_importance(model, TEXTS[:1], max_new_tokens=8, chunk=REAL_CHUNK)
    real_head_importance(model, TEXTS[1:2], max_new_tokens=8, chunk=REAL_CHUNK)
    again = real_head_importance(model, TEXTS[:1], max_new_tokens=8, chunk=REAL_CHUNK, partial=lambda part: None)
    assert (first.baseline, first.prune, first.order) == (again.baseline, again.prune, again.order)
    for key in first.keys:
        np.testing.assert_array_equal(first.drop[key], again.drop[key])
    for text in TEXTS[:2]:
        reference = real_head_importance(wide, [text], max_new_tokens=8, chunk=REAL_CHUNK)
        for chunk, first_rows in ((REAL_CHUNK, None), (REAL_CHUNK, REAL_CHUNK), (8, None)):
            imp = real_head_importance(model, [text], max_new_tokens=8, chunk=chunk, first=first_rows)
            assert imp.baseline == pytest.approx(reference.baseline, abs=1e-5)
            for key in imp.keys:
                np.testing.assert_allclose(imp.drop[key], reference.drop[key], rtol=0, atol=1e-5)
            assert imp.order == reference.order or np.allclose(
                [imp.drop[k][h] for k, h in imp.order], [reference.drop[k][h] for k, h in imp.order], atol=1e-5)
            np.testing.assert_allclose(imp.prune[:2], reference.prune[:2], rtol=0, atol=1e-5)
