"""Long-text families' local attention routed through our Eq. 1 (hub.routes_local): Longformer's and LED's sliding
window and global tokens, LongT5's local attention with its position bias, each map [B, H, T, T] equal to transformers' eager weights rebuilt from their own layout,
exactly 0 outside the window, and the long pass's regions equal to the maps."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from attention_viz.core.trace import trace  # noqa: E402
from attention_viz.core.variation import Variation  # noqa: E402
from attention_viz.hub import load_pretrained  # noqa: E402
from attention_viz.hub.attention import IMPLEMENTATION, Pass, switched  # noqa: E402
from attention_viz.hub.routes import ROUTED, implement  # noqa: E402
from attention_viz.hub.routes_local import dense_windows  # noqa: E402
from devtools import tiny_archs  # noqa: E402
from tests.hub.test_long import statistics  # noqa: E402

KINDS = ("longformer", "led")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    return {kind: load_pretrained(tiny_archs.save(kind, root / kind)) for kind in (*KINDS, "longt5")}


@pytest.mark.parametrize("kind", KINDS)
def test_a_windowed_family_is_proven_its_maps_are_0_outside_the_window_and_its_long_pass_equals_them(loaded, kind):
    """23 tokens (its model pads them to 24, a multiple of its window of 4): every map [1, H, 23, 23] gives a key more
    than w = 2 positions away exactly 0 and every key within it more; the long pass's summaries are the maps'
    statistics and its regions the maps."""
    model = loaded[kind]
    assert model.fidelity.proven and getattr(model.model, ROUTED, False), model.fidelity
    assert model.factor == pytest.approx(model.d_k ** -0.5)
    ids = torch.randint(5, 100, (1, 23), generator=torch.Generator().manual_seed(0))
    _, maps = model.forward(ids, ids[:, :4] if model.layout == "encoder-decoder" else None)
    i = torch.arange(23)
    far = (i[:, None] - i[None]).abs() > 2  # (T, T)
    encoder = [key for key in model.map_keys if key.startswith("encoder.")]
    assert encoder
    for key in encoder:
        assert maps[key].shape == (1, model.n_heads, 23, 23)
        assert bool((maps[key][0][:, far] == 0).all()) and bool((maps[key][0][:, ~far] > 0).all()), key
    run = model.long_run(ids, warn=False)
    try:
        assert run.keys == encoder
        for key in run.keys:
            reference = statistics(maps[key][0].detach().double())
            for name, values in reference.items():  # each head's statistics, formed in the pass under its window
                np.testing.assert_allclose(run.summaries[key][name], values, rtol=1e-4, atol=1e-5, err_msg=name)
            for head in range(model.n_heads):
                region = np.asarray(run.region(key, head, slice(0, 23), slice(0, 23)))
                np.testing.assert_allclose(region, maps[key][0, head].detach().numpy(), atol=1e-5, err_msg=key)
    finally:
        run.close()


def test_longformers_global_tokens_and_padding_equal_eager(loaded):
    """Two rows of 11 tokens (padded to 12 by the model; the second row's last 3 padding), global tokens 0 and 5 in
    the first row and 3 in the second: the logits at every text position and every map (eager's window layout and
    global rows rebuilt [B, H, T, T]) equal transformers' eager attention; a global token's row sees every text key,
    a local row its window and the global tokens."""
    wrapped = loaded["longformer"]
    model = wrapped.model
    ids = torch.randint(5, 100, (2, 11), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 11, dtype=torch.long)
    mask[1, 8:] = 0
    overall = torch.zeros(2, 11, dtype=torch.long)
    overall[0, 0] = overall[0, 5] = overall[1, 3] = 1
    keys = dict(wrapped.family.keys)
    run = Pass(Variation(), keys={id(m): keys[n] for n, m in model.named_modules() if n in keys},
               trace=trace(list(keys.values()), records=("weights",)))
    inputs = {"input_ids": ids, "attention_mask": mask, "global_attention_mask": overall}
    with torch.no_grad(), switched(run):
        ours = model(**inputs)
    implement(model, "eager")
    try:
        with torch.no_grad():
            eager = model(**inputs, output_attentions=True)
    finally:
        implement(model, IMPLEMENTATION)
    text = mask.bool()
    assert float((ours.logits - eager.logits)[text].abs().max()) < 1e-4
    assert len(run.maps) == len(eager.attentions) == 2
    for layer, (key, weights) in enumerate(run.maps.items()):
        assert weights.shape == (2, wrapped.n_heads, 11, 11)
        theirs = dense_windows(eager.attentions[layer], 2, 11, overall.bool(),
                               eager.global_attentions[layer].transpose(2, 3))
        rows = text[:, None, :, None].expand_as(weights)
        assert float((weights - theirs)[rows].abs().max()) < 1e-5, key
        assert bool((weights[0, :, 5] > 0).all()) and bool((weights[1, :, 3, :8] > 0).all())  # global rows: every key
        assert bool((weights[1, :, 3, 8:] == 0).all())  # ... but the padding
        assert bool((weights[0, :, 9, [0, 5]] > 0).all()) and bool((weights[0, :, 9, 1:5] == 0).all())


@pytest.mark.parametrize("kind", KINDS)
def test_the_padding_switch_off_equals_eager_given_a_mask_of_ones(loaded, kind):
    """A right-padded batch (the padding mask built by the model's own code: Longformer's through transformers' mask
    interface, LED's encoder's by its own function): with the padding switch off, the logits and the encoder's maps
    equal eager's given a mask of ones; with it on, the padded keys get exactly 0."""
    wrapped = loaded[kind]
    ids = torch.randint(5, 100, (2, 11), generator=torch.Generator().manual_seed(2))
    ids[1, 7:] = wrapped.pad_id
    decoder = ids[:, :4] if wrapped.layout == "encoder-decoder" else None
    logits, maps = wrapped.forward(ids, decoder, padding_mask=False)
    implement(wrapped.model, "eager")
    try:
        with torch.no_grad():
            eager = wrapped.model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True,
                                  **({"decoder_input_ids": decoder} if decoder is not None else {}))
    finally:
        implement(wrapped.model, IMPLEMENTATION)
    assert float((logits.detach() - eager.logits).abs().max()) < 1e-4
    theirs = eager.encoder_attentions if decoder is not None else eager.attentions
    for layer, weights in enumerate(theirs):
        rebuilt = dense_windows(weights, 2, 11)
        assert float((maps[f"encoder.{layer}.self_attn"].detach() - rebuilt).abs().max()) < 1e-5
    _, on = wrapped.forward(ids, decoder)
    assert bool((on["encoder.0.self_attn"][1][..., 7:] == 0).all())
    assert bool((maps["encoder.0.self_attn"][1][:, 5, 7] > 0).all())


def test_what_block_sparse_bigbirds_refusal_says_is_what_transformers_does():
    """The refusal's two facts, measured on transformers' own BigBird: in eval its block-sparse attention is softmax
    over its window's and the global blocks with the first block's keys counted 1 + num_random_blocks times (Eq. 1
    with log(1 + r) added there: equal to its output, where counting them once is not); a short text replaces its
    attention modules with full ones for good."""
    import math

    from transformers import BigBirdConfig, BigBirdModel

    from attention_viz.hub import PretrainedTransformer, UnsupportedModelError

    torch.manual_seed(0)
    H, d, b, r = 2, 8, 2, 2
    config = BigBirdConfig(vocab_size=50, hidden_size=H * d, num_hidden_layers=1, num_attention_heads=H,
                           intermediate_size=16, block_size=b, num_random_blocks=r, attention_type="block_sparse",
                           max_position_embeddings=64, sep_token_id=2)
    model = BigBirdModel(config).eval()
    attention = model.encoder.layer[0].attention.self
    seen = {}
    attention.register_forward_hook(lambda m, args, kwargs, out: seen.update(x=kwargs.get("hidden_states", args[0] if
                                                                                         args else None), out=out[0]),
                                    with_kwargs=True)
    with torch.no_grad():
        model(torch.randint(5, 50, (1, 32), generator=torch.Generator().manual_seed(0)))
    x = seen["x"]
    T, n = x.size(1), x.size(1) // b
    with torch.no_grad():
        q, k, v = (p(x).view(1, T, H, d).transpose(1, 2) for p in (attention.query, attention.key, attention.value))
    block = torch.arange(T) // b
    allowed = ((block[:, None] - block[None]).abs() <= 1) | (block[:, None] % (n - 1) == 0) | (block[None] % (n - 1)
                                                                                                  == 0)
    differences = []
    for counted in (1, 1 + r):
        bias = torch.zeros(T, T)
        bias[((block > 0) & (block < n - 1))[:, None] & (block[None] == 0)] = math.log(counted)
        weights = (q @ k.transpose(-1, -2) / math.sqrt(d) + bias).masked_fill(~allowed, float("-inf")).softmax(-1)
        differences.append(float(((weights @ v).transpose(1, 2).reshape(1, T, H * d) - seen["out"]).abs().max()))
    assert differences[1] < 1e-5 < differences[0]
    with torch.no_grad():
        model(torch.randint(5, 50, (1, 8)))  # (5 + 2r)·b = 18 tokens or fewer: full attention from now on
    assert model.encoder.layer[0].attention.self is not attention and model.attention_type == "original_full"
    with pytest.raises(UnsupportedModelError, match=r"for good.*counts 1 \+ num_random_blocks times"):
        PretrainedTransformer(BigBirdModel(config).eval(), None)


def test_longt5s_local_attention_is_its_radius_with_t5s_bias_and_transient_global_is_refused(loaded):
    """LongT5 (encoder_attention_type="local", local_radius 2): proven on load with its position bias; each encoder map
    [1, H, T, T] gives a key more than 2 positions away exactly 0; the bias kept is T5's bucketed one, the same table
    for both layers, B[i, j] a function of j − i; its factor on QKᵀ is 1 and the scaling note says so. A
    transient-global LongT5 is refused naming its global tokens."""
    from attention_viz.hub import PretrainedTransformer, UnsupportedModelError

    model = loaded["longt5"]
    assert model.fidelity.proven and "position_bias" in model.fidelity.honoured, model.fidelity
    assert model.factor == 1.0 and "multiplies QKᵀ by 1" in model.scaling_note
    ids = torch.randint(5, 100, (1, 13), generator=torch.Generator().manual_seed(3))
    logits, maps = model.forward(ids, ids[:, :4])
    i = torch.arange(13)
    far = (i[:, None] - i[None]).abs() > 2
    for layer in range(2):
        weights = maps[f"encoder.{layer}.self_attn"][0]
        assert weights.shape == (model.n_heads, 13, 13)
        assert bool((weights[:, far] == 0).all()) and bool((weights[:, ~far] > 0).all())
    biases = model.traced(ids, ids[:, :4]).biases
    first, second = biases["encoder.0.self_attn"], biases["encoder.1.self_attn"]
    assert torch.equal(first, second) and first.shape == (1, model.n_heads, 13, 13)
    assert torch.equal(first[0, :, 3, 5], first[0, :, 7, 9]) and not torch.equal(first[0, :, 3, 5], first[0, :, 5, 3])
    _, without = model.forward(ids, ids[:, :4], position_bias=False)
    assert not torch.allclose(without["encoder.0.self_attn"], maps["encoder.0.self_attn"])
    theirs, tokenizer = tiny_archs.tiny("longt5")
    theirs.config.encoder_attention_type = "transient-global"
    with pytest.raises(UnsupportedModelError, match="transient global token per block"):
        PretrainedTransformer(theirs, tokenizer)


@pytest.mark.parametrize("kind", KINDS)
def test_the_long_pass_at_length_keeps_the_window_as_its_rule_and_equals_eager(kind):
    """2,048 tokens (positions widened to hold them): the long pass keeps each encoder attention's window as its rule
    (no [T, K] mask), its output equals eager's forward, and a region across the window's edge equals eager's
    weights, rebuilt [T, T] from its windowed layout."""
    from attention_viz.hub import PretrainedTransformer

    T = 2048
    config = tiny_archs.tiny_config(kind)
    for field in ("max_position_embeddings", "max_encoder_position_embeddings"):
        if hasattr(config, field):
            setattr(config, field, T + 2)  # Longformer's positions start after its padding index
    theirs, tokenizer = tiny_archs.tiny(kind)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = type(theirs)(config).eval()
    wrapped = PretrainedTransformer(model, tokenizer)
    ids = torch.randint(5, 100, (1, T), generator=torch.Generator().manual_seed(4))
    run = wrapped.long_run(ids, warn=False)
    try:
        layers = run._layers  # map key -> KeptLayer: what recomputes its weights
        implement(model, "eager")
        try:
            with torch.no_grad():
                eager = (model.get_encoder() if wrapped.layout == "encoder-decoder" else model)(
                    input_ids=ids, output_attentions=True)
        finally:
            implement(model, IMPLEMENTATION)
        reference = eager.last_hidden_state if wrapped.layout == "encoder-decoder" else eager.logits
        assert run.length == T and float((run.logits - reference).abs().max()) < 1e-4
        for layer, key in enumerate(run.keys):
            assert layers[key].rule == "window" and layers[key].mask is None
            dense = dense_windows(eager.attentions[layer], 2, T)  # (1, H, T, T)
            for head in range(wrapped.n_heads):
                region = np.asarray(run.region(key, head, slice(1000, 1100), slice(980, 1120)))
                np.testing.assert_allclose(region, dense[0, head, 1000:1100, 980:1120].numpy(), atol=1e-5)
    finally:
        run.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_scale_switch_off_equals_eager_with_its_square_root_made_1(loaded, kind, monkeypatch):
    """Longformer's attention divides q by math.sqrt(head_dim) in its own code (LED's decoder keeps a `scaling`): the
    scale switch off equals eager with that square root made 1 (and LED's decoder's scaling 1), logits and maps."""
    import importlib
    import math
    from types import SimpleNamespace

    wrapped = loaded[kind]
    ids = torch.randint(5, 100, (1, 11), generator=torch.Generator().manual_seed(5))
    decoder = ids[:, :4] if wrapped.layout == "encoder-decoder" else None
    logits, maps = wrapped.forward(ids, decoder, scale="none")
    theirs, _ = tiny_archs.tiny(kind)  # the weights the loaded folder holds, transformers' own code
    for module in theirs.modules():
        if type(module).__name__ == "LEDDecoderAttention":
            module.scaling = 1.0
    monkeypatch.setattr(importlib.import_module(type(theirs).__module__), "math",
                        SimpleNamespace(**{**vars(math), "sqrt": lambda x: 1.0}))
    with torch.no_grad():
        eager = theirs(input_ids=ids, output_attentions=True,
                       **({"decoder_input_ids": decoder} if decoder is not None else {}))
    assert float((logits.detach() - eager.logits).abs().max()) < 1e-4
    for layer, weights in enumerate(eager.encoder_attentions if decoder is not None else eager.attentions):
        rebuilt = dense_windows(weights, 2, 11)
        assert float((maps[f"encoder.{layer}.self_attn"].detach() - rebuilt).abs().max()) < 1e-5
    scaled, _ = wrapped.forward(ids, decoder)
    assert float((scaled.detach() - eager.logits).abs().max()) > 1e-3  # the switch changed something
