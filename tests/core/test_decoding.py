"""Greedy decoding: the O(n) path that keeps keys and values decodes what rerunning the decoder decodes, for any model."""

import torch

from attention_viz import Transformer, TransformerConfig

PAD, BOS, EOS = 0, 1, 2


def random_model(seed: int, **config) -> Transformer:
    """A tiny untrained model with a seed-chosen shape: untrained models emit <pad> now and then."""
    g = torch.Generator().manual_seed(seed)
    pick = lambda *options: options[int(torch.randint(len(options), (1,), generator=g))]  # noqa: E731
    config = TransformerConfig(vocab_size=pick(5, 6), n_encoder_layers=pick(1, 2), n_decoder_layers=pick(1, 2, 3),
                               d_model=16, n_heads=pick(1, 2, 4), d_k=pick(4, 8), d_v=pick(4, 8), d_ff=32,
                               dropout=0.0, final_norm=bool(seed % 2), **config)
    torch.manual_seed(seed)
    return Transformer(config).eval()


def emits_pad_before_eos(tokens: torch.Tensor) -> bool:
    """Whether some row of generated tokens [B, n] has a <pad> that is not the padding after its <eos>."""
    for row in tokens.tolist():
        if PAD in row and (EOS not in row or row.index(PAD) < row.index(EOS)):
            return True
    return False


def test_reusing_keys_agrees_with_full_passes_when_the_model_emits_pad(one_thread):
    """Kept keys must hide <pad> as decode's padding mask does: a <pad> the model emitted is a masked key."""
    with_pad = 0
    for seed in range(120):
        model = random_model(seed)
        src = torch.randint(3, model.config.vocab_size, (8, 5), generator=torch.Generator().manual_seed(seed))
        src[1, 3:] = PAD
        for padding_mask in (True, False):
            kept, kept_maps = model.greedy_decode(src, 8, padding_mask=padding_mask)
            rerun, rerun_maps = model.greedy_decode(src, 8, padding_mask=padding_mask, reuse_keys=False)
            assert torch.equal(kept, rerun), (seed, padding_mask)
            for key in kept_maps:
                torch.testing.assert_close(kept_maps[key], rerun_maps[key], atol=1e-6, rtol=1e-5)
        with_pad += emits_pad_before_eos(rerun)
    assert with_pad >= 10  # the search did meet models that emit <pad> (the case that used to diverge)


def test_reusing_keys_agrees_when_bos_is_the_pad_token(one_thread):
    """With bos_id == pad_id the first key is hidden in both paths alike (all-zero first rows, never NaN)."""
    for seed in range(6):
        model = random_model(seed, bos_id=PAD)
        src = torch.randint(3, model.config.vocab_size, (2, 4), generator=torch.Generator().manual_seed(seed))
        kept, _ = model.greedy_decode(src, 6)
        rerun, _ = model.greedy_decode(src, 6, reuse_keys=False)
        assert torch.equal(kept, rerun)


def test_step_maps_are_each_steps_own_pass(one_thread):
    """step_maps[t] are the maps of the decoder on tgt[:, :t + 1]: under the causal mask rows 0..t of the last step's
    maps (earlier rows never change), without it the plain loop's last step, and earlier rows do change."""
    changed = 0
    for seed in range(24):
        model = random_model(seed)
        src = torch.randint(3, model.config.vocab_size, (2, 5), generator=torch.Generator().manual_seed(seed))
        for causal in (True, False):
            generated, maps = model.greedy_decode(src, 7, causal_mask=causal, reuse_keys=False)
            tgt = torch.cat([torch.full((2, 1), BOS), generated[:, :-1]], dim=1)  # (2, T): the last step's input
            steps = model.step_maps(src, tgt, causal_mask=causal)
            assert len(steps) == tgt.size(1)
            for t, step in enumerate(steps):
                assert set(step) == {key for key in maps if key.startswith("decoder.")}
                for key, weights in step.items():
                    keys = t + 1 if key.endswith("self_attn") else src.size(1)
                    assert weights.shape == (2, model.config.n_heads, t + 1, keys), (key, t)
                    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5, rtol=0)
                    if causal:
                        last = maps[key][:, :, : t + 1, :keys]
                        torch.testing.assert_close(weights, last, atol=1e-6, rtol=1e-5)
            if not causal and len(steps) > 1:
                for key, weights in steps[-1].items():
                    torch.testing.assert_close(weights, maps[key], atol=1e-6, rtol=1e-5)
                earlier = steps[-2]["decoder.0.self_attn"][:, :, :, :]  # (2, H, T-1, T-1)
                later = steps[-1]["decoder.0.self_attn"][:, :, :-1, :-1]
                changed += not torch.allclose(earlier, later, atol=1e-4)
    assert changed >= 20  # without the causal mask a new token moves the rows before it


def test_a_decode_of_no_tokens_is_refused_with_a_message_either_way():
    """max_len 0 (or less, or not a whole number) is refused by name, with the causal mask on (which reuses keys and
    once failed inside torch with "cannot reshape tensor of 0 elements") as with it off."""
    import pytest

    model = random_model(0)
    src = torch.randint(3, model.config.vocab_size, (2, 5))
    for max_len in (0, -3, 2.5, True):
        for causal_mask in (True, False):
            with pytest.raises(ValueError, match="max_new_tokens must be a whole number of at least 1"):
                model.greedy_decode(src, max_len, causal_mask=causal_mask)
    tokens, _ = model.greedy_decode(src, 1)
    assert tokens.shape == (2, 1)


def test_the_fast_decode_is_the_reference_bit_for_bit(one_thread):
    """attention_viz.fast.decode.greedy_decode (the app's runs) against Transformer.greedy_decode: the same tokens, maps
    and value norms, bit for bit, on random shapes, both kernels (core's and fast's), scalings, the padding mask, heads
    switched off (zero, mean, per-row gates); and the reference itself where it does not apply (no causal mask)."""
    from attention_viz.fast import attention as fast_attention
    from attention_viz.fast.decode import greedy_decode

    for seed in range(16):
        model = random_model(seed)
        c = model.config
        if seed % 2:
            model.use_kernel(fast_attention.scaled_dot_product_attention)
        g = torch.Generator().manual_seed(seed)
        src = torch.randint(3, c.vocab_size, (3, 2 + seed % 5), generator=g)
        src[1, -1:] = PAD
        key = f"decoder.{seed % c.n_decoder_layers}.{'cross_attn' if seed % 3 else 'self_attn'}"
        cases = [dict(), dict(scale="none", padding_mask=False), dict(scale=0.37),
                 dict(heads_off={key: [0]}), dict(heads_off={key: [c.n_heads - 1]}, ablation="mean",
                                                   head_means={key: torch.randn(c.n_heads, c.d_v, generator=g)}),
                 dict(gates={key: torch.rand(3, c.n_heads, generator=g)}), dict(causal_mask=False)]
        for case in cases:
            norms, fast_norms = {}, {}
            tokens, maps = model.greedy_decode(src, 7, value_norms=norms, **case)
            fast_tokens, fast_maps = greedy_decode(model, src, 7, value_norms=fast_norms, **case)
            assert torch.equal(tokens, fast_tokens), (seed, case)
            assert list(maps) == list(fast_maps) and list(norms) == list(fast_norms)
            for name in maps:
                assert torch.equal(maps[name], fast_maps[name]), (seed, case, name)
                assert torch.equal(norms[name], fast_norms[name]), (seed, case, name)


def test_a_guessed_decode_is_the_reference_bit_for_bit(one_thread, monkeypatch):
    """greedy_decode(..., guess=ids): a right guess is taken from one teacher-forced pass (no step is run); a wrong one
    (a token changed, cut short before <eos>, <eos> early, too long, random, empty) decodes on from the tokens its
    pass settled; either way the answer is the reference's bit for bit (tokens, maps, value norms), under every
    switch."""
    from attention_viz.fast import decode as fast_decode

    steps = []  # per layer's step: whether it had keys kept (the steps after the first)
    step = fast_decode.step
    monkeypatch.setattr(fast_decode, "step", lambda layer, y, memory, past, *a: steps.append(past is not None)
                        or step(layer, y, memory, past, *a))
    taken = resumed = by_passes = 0
    for seed in range(12):
        model = random_model(seed)
        c = model.config
        g = torch.Generator().manual_seed(100 + seed)
        src = torch.randint(3, c.vocab_size, (1, 2 + seed % 5), generator=g)
        key = f"decoder.{seed % c.n_decoder_layers}.{'cross_attn' if seed % 3 else 'self_attn'}"
        for case in (dict(), dict(scale="none", padding_mask=False), dict(scale=0.37), dict(heads_off={key: [0]}),
                     dict(heads_off={key: [c.n_heads - 1]}, ablation="mean",
                          head_means={key: torch.randn(c.n_heads, c.d_v, generator=g)})):
            norms = {}
            tokens, maps = model.greedy_decode(src, 6, value_norms=norms, **case)
            right = tokens[0].tolist()
            if EOS in right:
                right = right[:right.index(EOS) + 1]
            k = seed % len(right)  # the token changed
            changed = right[:k] + [(right[k] + 1) % c.vocab_size] + right[k + 1:]
            random_ids = torch.randint(c.vocab_size, (1 + seed % 9,), generator=g).tolist()
            for name, guess in (("right", right), ("changed", changed), ("short", right[:-1]), ("eos early", [EOS]),
                                ("too long", right + [3] * 4), ("random", random_ids), ("empty", [])):
                steps.clear()
                guessed_norms = {}
                guessed, guessed_maps = fast_decode.greedy_decode(model, src, 6, value_norms=guessed_norms,
                                                                  guess=guess, **case)
                assert torch.equal(tokens, guessed), (seed, case, name)
                assert list(maps) == list(guessed_maps) and list(norms) == list(guessed_norms)
                for key_ in maps:
                    assert torch.equal(maps[key_], guessed_maps[key_]), (seed, case, name, key_)
                    assert torch.equal(norms[key_], guessed_norms[key_]), (seed, case, name, key_)
                if name == "right":
                    assert not steps, (seed, case)  # taken from the one pass
                    taken += 1
                if name == "changed" and k + 1 < len(right):
                    # the first pass settles the tokens before k and the one at k, the passes after it (each on the
                    # settled tokens and the pass's own after them) settle the rest, or the steps go on from theirs
                    assert steps.count(True) <= (len(right) - k - 1) * c.n_decoder_layers, (seed, case)
                    resumed += 1
                    by_passes += not steps
    assert taken == 12 * 5 and resumed > 20 and by_passes > 5, (resumed, by_passes)


def test_a_wrong_guess_is_mended_by_passes_on_the_shipped_model(one_thread, monkeypatch):
    """The shipped reverse model with a head of decoder.0's self-attention off writes "rmmrofsnart" for
    "transformer", not its task's answer "remrofsnart": the answer's pass settles the first two tokens, and a second
    pass, on those and the first pass's own tokens after them, settles the rest, so no step is run; tokens, maps and
    value norms are the reference's bit for bit."""
    from attention_viz.data.tasks import target_or_none
    from attention_viz.fast import decode as fast_decode
    from attention_viz.service.catalog import Catalog

    catalog = Catalog()
    model, card = catalog.trained("reverse")
    tok = catalog.tokenizer
    src = torch.tensor([tok.encode("transformer").ids])  # (1, S)
    answer = tok.encode(target_or_none(card["task"], "transformer")).ids
    norms, guessed_norms = {}, {}
    tokens, maps = model.greedy_decode(src, 16, heads_off={"decoder.0.self_attn": [0]},
                                       value_norms=norms)
    assert tok.decode(tokens[0].tolist()) == "rmmrofsnart" != tok.decode(answer)
    passes, steps = [], []
    verified, step = fast_decode.verified, fast_decode.step
    monkeypatch.setattr(fast_decode, "verified", lambda *a: passes.append(a[6]) or verified(*a))
    monkeypatch.setattr(fast_decode, "step", lambda *a: steps.append(1) or step(*a))
    guessed, guessed_maps = fast_decode.greedy_decode(model, src, 16, guess=answer,
                                                      heads_off={"decoder.0.self_attn": [0]},
                                                      value_norms=guessed_norms)
    assert len(passes) == 2 and passes[0] == answer and passes[1][:2] == tokens[0, :2].tolist() and not steps
    assert torch.equal(tokens, guessed) and list(maps) == list(guessed_maps) and list(norms) == list(guessed_norms)
    for key in maps:
        assert torch.equal(maps[key], guessed_maps[key]) and torch.equal(norms[key], guessed_norms[key]), key


def test_a_decode_resumed_from_a_guess_steps_from_the_start_where_a_step_is_not_clear(one_thread, monkeypatch):
    """Decoding on from settled tokens, each step's token must lead the next by fast.decode.MARGIN (its keys come
    from a pass over many positions, so its logits differ from the reference's by rounding); where one does not, the
    decode starts again with the reference's own steps, and answers the same."""
    from attention_viz.fast import decode as fast_decode

    model = random_model(5)
    src = torch.tensor([[3, 4, 3, 4]])
    tokens, _ = model.greedy_decode(src, 6)
    right = tokens[0].tolist()
    assert len(right) >= 3 and EOS not in right[:2]
    calls = []
    leads = fast_decode.leads
    monkeypatch.setattr(fast_decode, "leads", lambda logits: calls.append(1) or (  # the guess's pass is clear,
        leads(logits) if len(calls) == 1 else torch.zeros(logits.shape[:-1], dtype=torch.bool)))  # no step after
    steps = []  # per layer's step: whether it had keys kept (the steps after the first)
    step = fast_decode.step
    monkeypatch.setattr(fast_decode, "step", lambda layer, y, memory, past, *a: steps.append(past is not None)
                        or step(layer, y, memory, past, *a))
    wrong = right[:1] + [(right[1] + 1) % model.config.vocab_size]
    guessed, _ = fast_decode.greedy_decode(model, src, 6, guess=wrong)
    assert torch.equal(tokens, guessed)
    n_layers = model.config.n_decoder_layers  # one step on from the settled two, then the reference's n steps
    assert len(calls) == 2 and steps.count(True) == n_layers + (len(right) - 1) * n_layers


def test_a_guess_is_not_taken_where_two_tokens_are_nearly_tied(one_thread):
    """A pass whose most likely token leads the next by less than fast.decode.MARGIN does not settle the token: the
    steps' own logits may order them the other way. Here every logit is 0 (the output layer zeroed), and argmax picks
    the first of equals, token 0, which the guess names."""
    from attention_viz.core.variation import variation_of
    from attention_viz.fast.decode import verified

    model = random_model(3)
    with torch.no_grad():
        model.generator.weight.zero_()
        if model.generator.bias is not None:
            model.generator.bias.zero_()
        memory, src_mask = model.encode(torch.tensor([[3, 4, 3]]))
        memory_kv = [layer.cross_attn.project_keys_values(memory, memory) for layer in model.decoder.layers]
        settled, found, predicted = verified(model, memory, memory_kv, src_mask, variation_of(), None, [0, 0, 0, 0], 4,
                                             BOS, EOS)
    assert settled == [] and not found and predicted == [0, 0, 0, 0]


def test_the_keys_of_settled_tokens_are_the_steps_own_up_to_rounding(one_thread):
    """fast.decode._prefix: each layer's keys and values of a decoder input in one pass over its positions are what
    the steps keep, token by token, up to float rounding; a <pad> among them is hidden from the later positions as
    the steps hide it, and without the padding mask it is not."""
    from attention_viz.core.layers import positional_encoding
    from attention_viz.core.model import decoder_probes
    from attention_viz.core.variation import variation_of
    from attention_viz.fast import decode as fast_decode

    model = random_model(4)
    c = model.config
    memory, src_mask = model.encode(torch.tensor([[3, 4, 3]]))
    memory_kv = [layer.cross_attn.project_keys_values(memory, memory) for layer in model.decoder.layers]
    pe = positional_encoding(8, c.d_model, "cpu")
    switches = [decoder_probes(None, i) for i in range(c.n_decoder_layers)]
    x = torch.tensor([[BOS, 3, PAD, 4, 3]])
    for padding_mask in (True, False):
        variation = variation_of(padding_mask=padding_mask)
        with torch.no_grad():
            kept = fast_decode._prefix(model, x, pe, memory_kv, src_mask, variation, switches)
            past = [None] * c.n_decoder_layers
            for t in range(x.size(1)):
                y = model.tgt_embed(x[:, t:t + 1]) + pe[t]
                mask = fast_decode.make_padding_mask(x[:, :t + 1], PAD) if padding_mask else None
                for i, layer in enumerate(model.decoder.layers):
                    y, past[i] = fast_decode.step(layer, y, memory_kv[i], past[i], src_mask, "sqrt_dk", mask,
                                                  *switches[i])
        for (k, v), (step_k, step_v) in zip(kept, past):
            torch.testing.assert_close(k, step_k, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(v, step_v, rtol=1e-5, atol=1e-6)


def test_the_start_and_end_tokens_are_the_models_own(one_thread):
    """greedy_decode (core.protocol's one signature) starts from the model's start_id and stops at its eos_ids, both
    from its config: the maps are those of a pass over start + the written tokens but the last."""
    from attention_viz.core.protocol import AttentionModel

    for seed in range(4):
        model = random_model(seed, bos_id=3, eos_id=4)
        assert isinstance(model, AttentionModel) and (model.start_id, model.eos_ids) == (3, {4})
        src = torch.randint(3, model.config.vocab_size, (1, 4), generator=torch.Generator().manual_seed(seed))
        written, maps = model.greedy_decode(src, 6)
        tokens = written[0].tolist()
        assert 4 not in tokens[:-1] and (tokens[-1] == 4 or len(tokens) == 6)
        _, forward = model(src, torch.tensor([[3] + tokens[:-1]]))
        for key in maps:
            torch.testing.assert_close(maps[key], forward[key], atol=1e-6, rtol=1e-5)
