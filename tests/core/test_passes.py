"""attention_viz.fast.passes: core's Transformer written out flat is its modules' pass bit for bit (logits, every map,
the records value norms are computed from) on random shapes and switches, and the modules' own pass where it does
not apply."""

import random

import torch

from attention_viz import Transformer, TransformerConfig
from attention_viz.core.layers import positional_encoding
from attention_viz.core.trace import recorded
from attention_viz.core.variation import variation_of
from attention_viz.fast import attention as fast_attention
from attention_viz.fast import passes

PAD = 0


def random_model(rng: random.Random) -> Transformer:
    """A tiny untrained model of a random shape: stacks of their own depth and final norms, d_v apart from d_k,
    shared embeddings or not."""
    n_heads = rng.choice([1, 2, 3, 4])
    config = TransformerConfig(vocab_size=rng.randint(5, 11), n_encoder_layers=rng.randint(1, 3),
                               n_decoder_layers=rng.randint(1, 3), d_model=rng.choice([8, 12, 16, 24]),
                               n_heads=n_heads, d_k=rng.choice([1, 3, 4, 8]), d_v=rng.choice([2, 4, 5]),
                               d_ff=rng.choice([8, 32]), dropout=rng.choice([0.0, 0.1]),
                               share_embeddings=rng.random() < 0.5, encoder_final_norm=rng.random() < 0.5,
                               decoder_final_norm=rng.random() < 0.5)
    torch.manual_seed(rng.randrange(10**6))
    model = Transformer(config).eval()
    return model.use_kernel(fast_attention.scaled_dot_product_attention) if rng.random() < 0.5 else model


def switch_cases(model: Transformer, rng: random.Random) -> list[dict]:
    """Switches as the app passes them: none, scalings and masks, heads off (zero and mean ablation), gates."""
    c = model.config
    keys = [f"encoder.{i}.self_attn" for i in range(c.n_encoder_layers)]
    keys += [f"decoder.{i}.{name}" for i in range(c.n_decoder_layers) for name in ("self_attn", "cross_attn")]
    g = torch.Generator().manual_seed(rng.randrange(10**6))
    off = {key: [rng.randrange(c.n_heads)] for key in rng.sample(keys, rng.randint(1, len(keys)))}
    return [dict(), dict(scale="none", padding_mask=False), dict(scale=0.37, causal_mask=False),
            dict(heads_off=off), dict(heads_off=off, ablation="mean",
                                      head_means={key: torch.randn(c.n_heads, c.d_v, generator=g) for key in off}),
            dict(gates={keys[0]: torch.rand(c.n_heads, generator=g)})]


def test_the_flat_passes_are_the_modules_bit_for_bit(one_thread):
    rng = random.Random(0)
    checked = 0
    for _ in range(24):
        model = random_model(rng)
        c = model.config
        B, S, T = rng.randint(1, 3), rng.randint(1, 9), rng.randint(1, 9)
        src = torch.randint(1, c.vocab_size, (B, S))
        tgt = torch.randint(1, c.vocab_size, (B, T))
        src[0, -1], tgt[-1, -1] = PAD, PAD  # a padded source and a <pad> the decoder was given
        for case in switch_cases(model, rng):
            variation = variation_of(**{k: v for k, v in case.items() if k not in ("head_means", "gates")})
            ours = []
            for encode, decode in ((model.encode, model.decode),
                                   (lambda *a: passes.encode(model, *a), lambda *a: passes.decode(model, *a))):
                kept = model.probes(variation, case.get("head_means"), case.get("gates"), keep=("v", "heads"),
                                    records=("weights",))
                with torch.inference_mode():
                    memory, src_mask = encode(src, variation, kept)
                    logits = decode(tgt, memory, src_mask, variation, kept)
                ours.append((memory, logits, list(recorded(kept, "weights").values()),
                             {key: (probe.kept["v"], probe.kept["heads"]) for key, probe in kept.items()}))
            (memory, logits, maps, records), (flat_memory, flat_logits, flat_maps, flat_records) = ours
            assert torch.equal(memory, flat_memory) and torch.equal(logits, flat_logits), case
            assert len(maps) == len(flat_maps) and all(torch.equal(a, b) for a, b in zip(maps, flat_maps)), case
            assert list(records) == list(flat_records)
            for key, (values, outputs) in records.items():
                assert torch.equal(values, flat_records[key][0]) and torch.equal(outputs, flat_records[key][1]), key
            checked += 1
    assert checked == 24 * 6


def test_the_flat_decode_pass_uses_the_memorys_keys_a_caller_kept(one_thread):
    """memory_kv: the cross-attention's keys and values the greedy decode computes once; the pass reads them."""
    model = random_model(random.Random(3))
    src, tgt = torch.tensor([[3, 4, 3]]), torch.tensor([[1, 3, 4]])
    variation = variation_of()
    with torch.inference_mode():
        memory, src_mask = passes.encode(model, src, variation)
        memory_kv = [layer.cross_attn.project_keys_values(memory, memory) for layer in model.decoder.layers]
        kept = passes.decode(model, tgt, memory, src_mask, variation, None, memory_kv)
        zeroed = [(torch.zeros_like(k), torch.zeros_like(v)) for k, v in memory_kv]
        other = passes.decode(model, tgt, memory, src_mask, variation, None, zeroed)
        plain = model.decode(tgt, memory, src_mask, variation)
    assert torch.equal(kept, plain) and not torch.equal(other, plain)


def test_where_the_flat_passes_do_not_apply_they_are_the_modules_pass(one_thread):
    """Training (dropout draws) and additive attention: passes.encode and passes.decode are the modules' own."""
    model = random_model(random.Random(5))
    additive = Transformer(TransformerConfig(vocab_size=7, d_model=8, n_heads=2, d_k=4, d_v=4, d_ff=8,
                                             compatibility="additive")).eval()
    src, tgt = torch.tensor([[3, 4, 3]]), torch.tensor([[1, 3]])
    variation = variation_of()
    for network in (model.train(), additive):
        assert not passes.flat(network)
        torch.manual_seed(0)
        with torch.no_grad():
            memory, src_mask = network.encode(src, variation)
            logits = network.decode(tgt, memory, src_mask, variation)
        torch.manual_seed(0)
        with torch.no_grad():
            flat_memory, flat_mask = passes.encode(network, src, variation)
            flat_logits = passes.decode(network, tgt, flat_memory, flat_mask, variation)
        assert torch.equal(memory, flat_memory) and torch.equal(logits, flat_logits)


def test_the_encoding_of_each_length_is_computed_once_and_is_the_cores():
    a = passes.encoding(7, 12, torch.device("cpu"))
    assert passes.encoding(7, 12, torch.device("cpu")) is a
    assert torch.equal(a, positional_encoding(7, 12, "cpu"))
    assert torch.equal(passes.encoding(30, 12, torch.device("cpu"))[:7], a)  # any length's rows are the same numbers
