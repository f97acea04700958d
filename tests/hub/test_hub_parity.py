"""Every supported family through our Eq. 1 equals transformers' own eager attention, and every switch equals a
hand-written float64 reference of the same change.

The models are small, with random weights and their real tokenizers, saved offline (conftest.py); each is loaded
twice: through attention_viz.hub.load_pretrained (ours) and with transformers' "eager" attention (the reference).
"""

from __future__ import annotations

import copy
import math
import random
import threading

import pytest
import torch

transformers = pytest.importorskip("transformers")

from attention_viz.hub import load_pretrained  # noqa: E402
from attention_viz.hub.loading import model_class  # noqa: E402

ENCODER_DECODER = ("marian", "bart", "mbart")
DECODERS = ("gpt2", "llama", "qwen2")
ALL = (*ENCODER_DECODER, "bert", *DECODERS)


def eager(folder, dtype=torch.float32):
    """The same folder loaded by transformers with its own eager attention."""
    config = transformers.AutoConfig.from_pretrained(folder)
    return model_class(config).from_pretrained(folder, attn_implementation="eager", dtype=dtype).eval()


def batch(model, family):
    """(input_ids [2, S] with the second row padded at the end, attention_mask, decoder_input_ids [2, T] or None)."""
    pad = model.pad_id if model.pad_id is not None else 0
    a = model.encode("the cat sat on the mat").ids
    b = model.encode("attention").ids
    S = max(len(a), len(b))
    ids = torch.full((2, S), pad, dtype=torch.long)
    ids[0, : len(a)], ids[1, : len(b)] = a, b
    mask = torch.zeros(2, S, dtype=torch.long)
    mask[0, : len(a)], mask[1, : len(b)] = 1, 1
    decoder = None
    if family in ENCODER_DECODER:
        generator = torch.Generator().manual_seed(0)
        decoder = torch.randint(3, model.vocab_size - 1, (2, 5), generator=generator)
        decoder[:, 0] = model.start_id
    return ids, mask, decoder


def eager_maps(outputs, family) -> dict[str, torch.Tensor]:
    """transformers' output_attentions under our keys, in our order."""
    if family in ENCODER_DECODER:
        maps = {f"encoder.{i}.self_attn": a for i, a in enumerate(outputs.encoder_attentions)}
        for i, (s, c) in enumerate(zip(outputs.decoder_attentions, outputs.cross_attentions)):
            maps[f"decoder.{i}.self_attn"], maps[f"decoder.{i}.cross_attn"] = s, c
        return maps
    stack = "encoder" if family == "bert" else "decoder"
    return {f"{stack}.{i}.self_attn": a for i, a in enumerate(outputs.attentions)}


def run_both(folder, family, dtype):
    ours = load_pretrained(folder, dtype=dtype)
    reference = eager(folder, dtype)
    ids, mask, decoder = batch(ours, family)
    with torch.no_grad():
        logits, maps = ours.forward(ids, decoder, attention_mask=mask)
        kwargs = {"input_ids": ids, "attention_mask": mask, "output_attentions": True}
        if decoder is not None:
            kwargs["decoder_input_ids"] = decoder
        outputs = reference(**kwargs)
    return ours, logits, maps, outputs, mask


@pytest.mark.parametrize("family", ALL)
@pytest.mark.parametrize("dtype, atol", [(torch.float32, 2e-5), (torch.float64, 1e-12)], ids=["float32", "float64"])
def test_every_map_and_the_logits_equal_transformers_eager_attention(tiny_folders, family, dtype, atol):
    ours, logits, maps, outputs, mask = run_both(tiny_folders[family], family, dtype)
    if family in ("llama", "qwen2") and dtype == torch.float64:
        atol = 1e-7  # their eager attention takes the softmax in float32 even in float64 (float64: the test below)
    expected = eager_maps(outputs, family)
    assert list(maps) == list(expected)  # every key, in our order (encoder layers, then per decoder layer self, cross)
    for key, weights in expected.items():
        assert maps[key].dtype == dtype and maps[key].shape == weights.shape, key
        torch.testing.assert_close(maps[key], weights, atol=atol, rtol=0, msg=key)
    torch.testing.assert_close(logits, outputs.logits, atol=atol * 10, rtol=0)


@pytest.mark.parametrize("family", [*ENCODER_DECODER, *DECODERS])
@pytest.mark.parametrize("reuse_keys", [True, False])
def test_greedy_decoding_writes_what_generate_writes(tiny_folders, family, reuse_keys):
    ours = load_pretrained(tiny_folders[family])
    reference = eager(tiny_folders[family])
    src = ours.encode("attention is all you need").ids[None]  # (1, S)
    n = 7
    written, maps = ours.greedy_decode(src, n, reuse_keys=reuse_keys)
    with torch.no_grad():
        generated = reference.generate(src, attention_mask=torch.ones_like(src), max_new_tokens=n, num_beams=1,
                                       do_sample=False)
    start = 1 if family in ENCODER_DECODER else src.size(1)
    assert written.tolist() == generated[:, start:].tolist()
    context = (1 if family in ENCODER_DECODER else src.size(1)) + written.size(1) - 1  # the decoder's input
    assert maps["decoder.0.self_attn"].shape[-2:] == (context, context)
    if family in ENCODER_DECODER:
        assert maps["decoder.0.cross_attn"].shape[-2:] == (context, src.size(1))


# ----------------------------------------------------------------------------- switches against float64 references

REFERENCE = {}  # what the reference attention of the current test knows: roles, pads, switches


def role_of(name: str) -> str:
    """A module's role from its dotted name, written out by hand: "cross", "encoder" or "decoder" self-attention."""
    if "encoder_attn" in name:
        return "cross"
    return "encoder" if ".encoder." in f".{name}." or name.startswith("bert.") else "decoder"


def reference_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Plain float64 attention that ignores the mask transformers built and makes its own from the inputs."""
    role = REFERENCE["roles"][id(module)]
    n_rep = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(n_rep, 1), value.repeat_interleave(n_rep, 1)
    factor = scaling if REFERENCE["factor"] is None else REFERENCE["factor"]
    scores = (query.double() @ k.double().transpose(-1, -2)) * factor  # (B, H, Q, K)
    B, _, Q, K = scores.shape
    allowed = torch.ones(B, 1, Q, K, dtype=torch.bool)
    if role == "decoder" and REFERENCE["causal"]:
        allowed &= torch.ones(Q, K, dtype=torch.bool).tril(K - Q)
    pads = REFERENCE["source"] if role in ("encoder", "cross") else REFERENCE["target"]
    if REFERENCE["padding"] and pads is not None:
        allowed &= pads[:, None, None, :K].bool()
    weights = torch.softmax(scores.masked_fill(~allowed, -math.inf), -1).nan_to_num(0.0)
    return (weights @ v.double()).transpose(1, 2).contiguous(), weights


transformers.AttentionInterface.register("test_reference", reference_attention)

SWITCHES = {
    "unscaled": dict(scale="none"),
    "factor": dict(scale=0.37),
    "causal_off": dict(causal_mask=False),
    "padding_off": dict(padding_mask=False),
}


@pytest.mark.parametrize("family, switch", [(family, switch) for family in ALL for switch in SWITCHES
                                             if not (family == "bert" and switch == "causal_off")])  # no causal mask
def test_each_switch_equals_a_float64_reference_of_the_same_change(tiny_folders, family, switch):
    options = SWITCHES[switch]
    ours, _, _, _, _ = run_both(tiny_folders[family], family, torch.float64)
    reference = eager(tiny_folders[family], torch.float64)
    reference.set_attn_implementation("test_reference")
    ids, mask, decoder = batch(ours, family)
    scale = options.get("scale", "sqrt_dk")
    REFERENCE.update(
        roles={id(m): role_of(name) for name, m in reference.named_modules()},
        factor=None if scale == "sqrt_dk" else (1.0 if scale == "none" else scale),
        causal=options.get("causal_mask", True), padding=options.get("padding_mask", True),
        source=mask if family in (*ENCODER_DECODER, "bert") else None,
        target=mask if family in DECODERS else None,
    )
    with torch.no_grad():
        logits, maps = ours.forward(ids, decoder, attention_mask=mask, **options)
        kwargs = {"input_ids": ids, "attention_mask": mask, "output_attentions": True}
        if decoder is not None:
            kwargs["decoder_input_ids"] = decoder
        outputs = reference(**kwargs)
    expected = eager_maps(outputs, family)
    for key, weights in expected.items():
        torch.testing.assert_close(maps[key], weights, atol=1e-12, rtol=0, msg=key)
    torch.testing.assert_close(logits, outputs.logits, atol=1e-10, rtol=0)
    # and the switch changed something: the maps differ from the default run's
    _, default = ours.forward(ids, decoder, attention_mask=mask)
    assert any((maps[k] - default[k]).abs().max() > 1e-6 for k in maps), switch


@pytest.mark.parametrize("family", ALL)
def test_invariants_rows_sum_to_one_and_masked_weights_are_exactly_zero(tiny_folders, family):
    ours = load_pretrained(tiny_folders[family])
    ids, mask, decoder = batch(ours, family)
    padded = ~mask[1].bool()  # the second row's pad positions
    assert padded.any()
    for padding in (True, False):
        with torch.no_grad():
            _, maps = ours.forward(ids, decoder, attention_mask=mask, padding_mask=padding)
        for key, weights in maps.items():
            torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)), atol=1e-5, rtol=0)
            if key.startswith("decoder.") and key.endswith("self_attn"):
                assert (weights.triu(1) == 0).all(), key  # the causal mask: exactly 0 above the diagonal
            sees_source = key.startswith("encoder.") or key.endswith("cross_attn") or family in DECODERS
            if sees_source:
                pad_columns = weights[1, ..., padded]
                if padding:
                    assert (pad_columns == 0).all(), key
                else:
                    assert pad_columns.abs().max() > 0, key


# ----------------------------------------------------------------------------- bad inputs, threads, random shapes

def test_bad_calls_are_refused_with_a_message_before_any_work(tiny_folders, monkeypatch):
    ours = load_pretrained(tiny_folders["marian"])
    ids = ours.encode("the cat").ids[None]
    monkeypatch.setattr(ours.model, "forward", lambda *a, **k: pytest.fail("the model ran"))
    for scale in ("foo", -1, 0, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="scale"):
            ours.forward(ids, ids, scale=scale)
    with pytest.raises(ValueError, match="give decoder_input_ids"):
        ours.forward(ids)
    bert = load_pretrained(tiny_folders["bert"])
    with pytest.raises(ValueError, match="encoder only"):
        bert.greedy_decode(bert.encode("the cat").ids[None], 3)
    gpt2 = load_pretrained(tiny_folders["gpt2"])
    with pytest.raises(ValueError, match="no decoder input"):
        gpt2.forward(ids, ids)


def test_two_threads_with_different_switches_on_one_model_each_get_their_own(tiny_folders):
    shared = load_pretrained(tiny_folders["llama"])
    ids = shared.encode("the cat sat on the mat").ids[None]
    alone = {scale: shared.forward(ids, scale=scale)[1] for scale in ("sqrt_dk", "none")}
    mismatches = []

    def work(scale):
        for _ in range(20):
            _, maps = shared.forward(ids, scale=scale)
            if any(not torch.equal(maps[k], alone[scale][k]) for k in maps):
                mismatches.append(scale)

    threads = [threading.Thread(target=work, args=(scale,)) for scale in ("sqrt_dk", "none")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not mismatches


@pytest.mark.parametrize("seed", range(10))
def test_random_small_configurations_equal_eager(seed):
    from attention_viz.hub import PretrainedTransformer

    rng = random.Random(seed)
    heads = rng.choice([1, 2, 4])
    head_dim = rng.choice([2, 4, 8, 16])
    layers = rng.randint(1, 3)
    if seed % 2:
        kv = rng.choice([h for h in range(1, heads + 1) if heads % h == 0])
        config = transformers.LlamaConfig(vocab_size=37, hidden_size=heads * head_dim, num_hidden_layers=layers,
                                          num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim,
                                          intermediate_size=16, bos_token_id=1, eos_token_id=2)
        cls = transformers.LlamaForCausalLM
    else:
        config = transformers.MarianConfig(vocab_size=37, d_model=heads * head_dim, encoder_layers=layers,
                                           decoder_layers=rng.randint(1, 3), encoder_attention_heads=heads,
                                           decoder_attention_heads=heads, encoder_ffn_dim=16, decoder_ffn_dim=16,
                                           pad_token_id=0, eos_token_id=2, decoder_start_token_id=0)
        cls = transformers.MarianMTModel
    torch.manual_seed(seed)
    reference = cls(config).eval()
    reference.set_attn_implementation("eager")

    class Pieces:  # ids are all this test needs of a tokenizer
        pad_token_id, eos_token_id = (None, 2) if seed % 2 else (0, 2)

        def convert_ids_to_tokens(self, ids):
            return [str(i) for i in ids]

    ours = PretrainedTransformer(copy.deepcopy(reference), Pieces())
    S, T = rng.randint(1, 9), rng.randint(1, 9)
    ids = torch.randint(3, 37, (1, S))
    kwargs = {"input_ids": ids, "output_attentions": True}
    decoder = None if seed % 2 else torch.randint(3, 37, (1, T))
    if decoder is not None:
        kwargs["decoder_input_ids"] = decoder
    with torch.no_grad():
        logits, maps = ours.forward(ids, decoder)
        outputs = reference(**kwargs)
    expected = eager_maps(outputs, "llama" if seed % 2 else "marian")
    assert list(maps) == list(expected)
    for key, weights in expected.items():
        torch.testing.assert_close(maps[key], weights, atol=2e-6, rtol=0, msg=key)
    torch.testing.assert_close(logits, outputs.logits, atol=2e-5, rtol=0)
