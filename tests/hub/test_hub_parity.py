"""Every supported family through our Eq. 1 equals transformers' own eager attention, greedy decoding writes what
`generate` writes, and every switch equals a hand-written float64 reference of the same change.

The models are small, with random weights and their real tokenizers, saved offline (conftest.py); each is loaded
twice: through attention_viz.hub.load_pretrained (ours) and by transformers itself, with its "eager" attention or
with the reference below (an independent copy: nothing of ours is in it).
"""

from __future__ import annotations

import copy
import math
import random
import threading

import pytest
import torch

transformers = pytest.importorskip("transformers")

from attention_viz.hub import PretrainedTransformer, load_pretrained  # noqa: E402
from attention_viz.hub.loading import model_class  # noqa: E402

ENCODER_DECODER = ("marian", "bart", "mbart")
DECODERS = ("gpt2", "llama", "qwen2")
ALL = (*ENCODER_DECODER, "bert", *DECODERS)
SOFTMAX_IN_FLOAT32 = ("llama", "qwen2")  # their eager attention takes the softmax in float32 whatever the dtype


def eager(folder, dtype=torch.float32):
    """The same folder loaded by transformers alone, with its own eager attention."""
    config = transformers.AutoConfig.from_pretrained(folder)
    return model_class(config).from_pretrained(folder, attn_implementation="eager", dtype=dtype).eval()


def batch(model, family, left=False):
    """(input_ids [2, S], attention_mask [2, S], decoder_input_ids [2, T] or None): the second row is shorter and
    padded with the tokenizer's <pad> (at the end, or at the start with left=True)."""
    pad = model.pad_id if model.pad_id is not None else 0
    rows = [model.encode("the cat sat on the mat").ids, model.encode("attention").ids]
    S = max(len(r) for r in rows)
    ids = torch.full((2, S), pad, dtype=torch.long)
    mask = torch.zeros(2, S, dtype=torch.long)
    for i, r in enumerate(rows):
        where = slice(S - len(r), S) if left else slice(0, len(r))
        ids[i, where], mask[i, where] = r, 1
    decoder = None
    if family in ENCODER_DECODER:
        generator = torch.Generator().manual_seed(0)
        decoder = torch.randint(3, len(model.tokenizer) - 1, (2, 5), generator=generator)
        decoder[:, 0] = model.start_id
    return ids, mask, decoder


def eager_maps(outputs, family) -> dict[str, torch.Tensor]:
    """transformers' output_attentions under our keys, in our order (encoder layers, then per decoder layer self,
    cross)."""
    if family in ENCODER_DECODER:
        maps = {f"encoder.{i}.self_attn": a for i, a in enumerate(outputs.encoder_attentions)}
        for i, (s, c) in enumerate(zip(outputs.decoder_attentions, outputs.cross_attentions, strict=True)):
            maps[f"decoder.{i}.self_attn"], maps[f"decoder.{i}.cross_attn"] = s, c
        return maps
    stack = "encoder" if family == "bert" else "decoder"
    return {f"{stack}.{i}.self_attn": a for i, a in enumerate(outputs.attentions)}


def transformers_pass(model, ids, mask, decoder):
    """transformers' own forward with every attention's weights (output_attentions=True)."""
    kwargs = {"input_ids": ids, "attention_mask": mask, "output_attentions": True}
    if decoder is not None:
        kwargs["decoder_input_ids"] = decoder
    with torch.no_grad():
        return model(**kwargs)


def assert_same(maps, logits, outputs, family, atol, logits_atol):
    """Our maps (every key, in our order) and logits equal transformers' outputs."""
    expected = eager_maps(outputs, family)
    assert list(maps) == list(expected)
    for key, weights in expected.items():
        assert maps[key].dtype == weights.dtype and maps[key].shape == weights.shape, key
        torch.testing.assert_close(maps[key], weights, atol=atol, rtol=0, msg=key)
    # a model without an output head (BertModel) answers its last hidden states, as forward does
    expected_logits = outputs.logits if getattr(outputs, "logits", None) is not None else outputs.last_hidden_state
    torch.testing.assert_close(logits, expected_logits, atol=logits_atol, rtol=0)


# ----------------------------------------------------------------------------- against transformers' eager attention

@pytest.mark.parametrize("family", ALL)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_every_map_and_the_logits_equal_transformers_eager_attention(tiny_folder, family, dtype):
    atol, logits_atol = (2e-6, 1e-5) if dtype == torch.float32 else (1e-12, 1e-12)
    if dtype == torch.float64 and family in SOFTMAX_IN_FLOAT32:
        # eager rounds its weights to float32; ours stay float64 (proven to 1e-12 against the float64 reference below)
        atol, logits_atol = 1e-6, 1e-5
    folder = tiny_folder(family)
    check_eager(load_pretrained(folder, dtype=dtype), folder, family, atol, logits_atol)


def check_eager(ours, folder, family, atol, logits_atol):
    """ours (loaded from folder) on a padded batch: every map and the logits (or last hidden states) equal the same
    folder's in transformers' eager attention, in ours' dtype."""
    reference = eager(folder, next(ours.model.parameters()).dtype)
    ids, mask, decoder = batch(ours, family)
    assert (mask == 0).any()  # the second row is padded
    with torch.no_grad():
        logits, maps = ours.forward(ids, decoder, attention_mask=mask)
    assert_same(maps, logits, transformers_pass(reference, ids, mask, decoder), family, atol, logits_atol)


@pytest.mark.parametrize("family", DECODERS)
def test_a_left_padded_prompt_equals_eager_but_for_the_rows_that_see_no_key(tiny_folder, family):
    """The documented difference: a query that may see no key at all (a left-padded prompt's pad rows under the
    causal mask) is all zeros in our Eq. 1 and uniform in eager's; every other row is equal."""
    ours, reference = load_pretrained(tiny_folder(family)), eager(tiny_folder(family))
    ids, mask, _ = batch(ours, family, left=True)
    with torch.no_grad():
        logits, maps = ours.forward(ids, attention_mask=mask)
    expected = eager_maps(transformers_pass(reference, ids, mask, None), family)
    blind = ~mask.bool()  # (B, S): pad queries, which see nothing under the causal mask
    assert blind.any()
    for key, weights in expected.items():
        seen = maps[key].permute(0, 2, 1, 3)  # (B, Q, H, K)
        assert (seen[blind] == 0).all(), key
        torch.testing.assert_close(seen[~blind], weights.permute(0, 2, 1, 3)[~blind], atol=2e-6, rtol=0, msg=key)


# ----------------------------------------------------------------------------- greedy decoding against generate

def check_greedy_maps(ours, family, ids, mask, written, maps):
    """The maps greedy_decode returns are one full pass over the decoder input it documents: start token (or prompt)
    and every written token but the last; shapes [B, H, Q, K]."""
    B, S, n, H = ids.size(0), ids.size(1), written.size(1), ours.n_heads
    if family in ENCODER_DECODER:
        decoder = torch.cat([torch.full((B, 1), ours.start_id), written[:, :-1]], 1)  # (B, n)
        shapes = {"encoder": (B, H, S, S), "self_attn": (B, H, n, n), "cross_attn": (B, H, n, S)}
        _, again = ours.forward(ids, decoder, attention_mask=mask)
    else:
        sequence = torch.cat([ids, written[:, :-1]], 1)  # (B, S + n - 1)
        L = S + n - 1
        shapes = {"self_attn": (B, H, L, L)}
        _, again = ours.forward(sequence, attention_mask=torch.cat([mask, torch.ones_like(written[:, :-1])], 1))
    assert list(maps) == ours.map_keys == list(again)
    for key, weights in maps.items():
        kind = "encoder" if key.startswith("encoder.") else key.split(".")[-1]
        assert tuple(weights.shape) == shapes[kind], key
        assert torch.equal(weights, again[key]), key


@pytest.mark.parametrize("family", [*ENCODER_DECODER, *DECODERS])
@pytest.mark.parametrize("reuse_keys", [True, False], ids=["cache", "rerun"])
def test_greedy_decoding_writes_what_generate_writes(tiny_folder, family, reuse_keys):
    ours, reference = load_pretrained(tiny_folder(family)), eager(tiny_folder(family))
    n = 7
    if family in ENCODER_DECODER:  # two sources, the second padded
        ids, mask, _ = batch(ours, family)
    else:  # one prompt (a padded batch of prompts: the test below)
        ids = ours.encode("attention is all you need").ids[None]
        mask = torch.ones_like(ids)
    with torch.no_grad():
        written, maps = ours.greedy_decode(ids, n, attention_mask=mask, reuse_keys=reuse_keys)
        generated = reference.generate(ids, attention_mask=mask, max_new_tokens=n, num_beams=1, do_sample=False)
    start = 1 if family in ENCODER_DECODER else ids.size(1)  # generate's output begins with the start or the prompt
    assert written.tolist() == generated[:, start:].tolist()
    assert len(set(written.flatten().tolist())) > 1  # the model writes more than one token over and over
    with torch.no_grad():
        check_greedy_maps(ours, family, ids, mask, written, maps)


def test_a_banned_token_is_never_written_even_when_it_is_the_most_likely(tiny_folder):
    """opus-mt's generation config bans <pad> (bad_words_ids): with <pad> made every step's most likely token (a bias
    on its logit, in both copies), greedy_decode writes what generate writes, and no <pad> before a row's end."""
    ours, reference = load_pretrained(tiny_folder("marian")), eager(tiny_folder("marian"))
    pad, eos = ours.pad_id, ours.tokenizer.eos_token_id
    for model in (ours.model, reference):
        model.final_logits_bias[..., pad] += 100.0
    ids, mask, _ = batch(ours, "marian")
    with torch.no_grad():
        logits, _ = ours.forward(ids, torch.full((2, 1), ours.start_id), attention_mask=mask)
        written, _ = ours.greedy_decode(ids, 6, attention_mask=mask)
        generated = reference.generate(ids, attention_mask=mask, max_new_tokens=6, num_beams=1, do_sample=False)
    assert (logits[:, -1].argmax(-1) == pad).all()  # unbanned, <pad> would come first
    assert written.tolist() == generated[:, 1:].tolist()
    for row in written.tolist():
        assert pad not in row[: row.index(eos) if eos in row else len(row)], row  # after </s>: the fill


@pytest.mark.parametrize("family", DECODERS)
def test_greedy_decoding_of_left_padded_prompts_writes_what_generate_writes(tiny_folder, family):
    """Positions count each row's real tokens from 0 (attention_mask.cumsum(-1) - 1, as generate gives them): the
    tokens are generate's, and the maps are eager's pass over the prompt and what was written with those positions
    (but for the padding rows, which see no key: the documented zeros)."""
    ours, reference = load_pretrained(tiny_folder(family)), eager(tiny_folder(family))
    ids, mask, _ = batch(ours, family, left=True)
    with torch.no_grad():
        written, maps = ours.greedy_decode(ids, 6, attention_mask=mask)
        generated = reference.generate(ids, attention_mask=mask, max_new_tokens=6, num_beams=1, do_sample=False)
    assert written.tolist() == generated[:, ids.size(1):].tolist()
    sequence = torch.cat([ids, written[:, :-1]], 1)  # (B, S + n - 1)
    full = torch.cat([mask, torch.ones_like(written[:, :-1])], 1)
    positions = (full.cumsum(-1) - 1).masked_fill(full == 0, 1)
    with torch.no_grad():
        outputs = reference(input_ids=sequence, attention_mask=full, position_ids=positions, output_attentions=True)
    blind = ~full.bool()  # (B, L): pad queries
    for key, weights in eager_maps(outputs, family).items():
        seen = maps[key].permute(0, 2, 1, 3)  # (B, Q, H, K)
        assert (seen[blind] == 0).all(), key
        torch.testing.assert_close(seen[~blind], weights.permute(0, 2, 1, 3)[~blind], atol=2e-6, rtol=0, msg=key)


# ----------------------------------------------------------------------------- switches against float64 references

REFERENCE: dict = {}  # what the reference attention of the current test knows: roles, pads, switches


def role_of(name: str) -> str:
    """A module's role from its dotted name, written out by hand: "cross", "encoder" or "decoder" self-attention."""
    if "encoder_attn" in name:
        return "cross"
    return "encoder" if ".encoder." in f".{name}." else "decoder"


def reference_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Plain float64 attention that ignores the mask transformers built and makes its own from what the test knows:
    the module's role (causal for decoder self-attention), the pad positions, the switches."""
    role = REFERENCE["roles"][id(module)]
    n_rep = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(n_rep, 1).double(), value.repeat_interleave(n_rep, 1).double()
    factor = scaling if REFERENCE["factor"] is None else REFERENCE["factor"]
    scores = (query.double() @ k.transpose(-1, -2)) * factor  # (B, H, Q, K)
    B, _, Q, K = scores.shape
    allowed = torch.ones(B, 1, Q, K, dtype=torch.bool)
    if role == "decoder" and REFERENCE["causal"]:
        allowed &= torch.ones(Q, K, dtype=torch.bool).tril(K - Q)  # query i (of the last Q) sees keys up to itself
    pads = REFERENCE["source"] if role in ("encoder", "cross") else REFERENCE["target"]
    if REFERENCE["padding"] and pads is not None:
        allowed &= pads[:, None, None, :K].bool()
    weights = torch.softmax(scores.masked_fill(~allowed, -math.inf), -1).nan_to_num(0.0)
    return (weights @ v).transpose(1, 2).contiguous().to(query.dtype), weights.to(query.dtype)


transformers.AttentionInterface.register("test_reference", reference_attention)

SWITCHES = {
    "default": {},
    "unscaled": {"scale": "none"},
    "factor": {"scale": 0.37},
    "causal_off": {"causal_mask": False},
    "padding_off": {"padding_mask": False},
    "all_off": {"scale": "none", "causal_mask": False, "padding_mask": False},
}


def reference_model(folder, family, options, source=None, target=None):
    """The folder loaded by transformers in float64 with the reference attention, told these switches."""
    model = eager(folder, torch.float64)
    model.set_attn_implementation("test_reference")
    scale = options.get("scale", "sqrt_dk")
    REFERENCE.clear()
    REFERENCE.update(roles={id(m): role_of(name) for name, m in model.named_modules()},
                     factor=None if scale == "sqrt_dk" else (1.0 if scale == "none" else float(scale)),
                     causal=options.get("causal_mask", True), padding=options.get("padding_mask", True),
                     source=source, target=target)
    return model


@pytest.mark.parametrize("family, switch", [(family, switch) for family in ALL for switch in SWITCHES
                                             if not (family == "bert" and "causal" in str(SWITCHES[switch]))])
def test_each_switch_equals_a_float64_reference_of_the_same_change(tiny_folder, family, switch):
    check_switch(load_pretrained(tiny_folder(family), dtype=torch.float64), tiny_folder(family), family, switch)


def check_switch(ours, folder, family, switch, logits_atol=1e-10):
    """ours (float64, loaded from folder) under SWITCHES[switch] equals the float64 reference told the same switch,
    and the switch changes some map."""
    options = SWITCHES[switch]
    ids, mask, decoder = batch(ours, family)
    reference = reference_model(folder, family, options,
                                source=mask if family not in DECODERS else None,
                                target=mask if family in DECODERS else None)
    with torch.no_grad():
        logits, maps = ours.forward(ids, decoder, attention_mask=mask, **options)
        _, default = ours.forward(ids, decoder, attention_mask=mask)
    assert_same(maps, logits, transformers_pass(reference, ids, mask, decoder), family, 1e-12, logits_atol)
    if options:  # the switch changed something
        assert max((maps[k] - default[k]).abs().max() for k in maps) > 1e-3, switch


GREEDY_SWITCHES = ("unscaled", "factor", "causal_off", "padding_off")


@pytest.mark.parametrize("family, switch", [(family, switch) for family in (*ENCODER_DECODER, *DECODERS)
                                             for switch in GREEDY_SWITCHES
                                             if not (family in DECODERS and switch == "padding_off")])
def test_greedy_decoding_under_each_switch_writes_what_the_references_generate_writes(tiny_folder, family, switch):
    """Under a switch, what greedy_decode writes equals transformers' own generate on the float64 reference of that
    switch (every step rerun in full when the causal mask is off, as a model that sees the future must)."""
    options = SWITCHES[switch]
    ours = load_pretrained(tiny_folder(family), dtype=torch.float64)
    if family in ENCODER_DECODER:  # two sources, the second padded: the padding mask matters
        ids, mask, _ = batch(ours, family)
    else:
        ids = ours.encode("attention is all you need").ids[None]
        mask = torch.ones_like(ids)
    reference = reference_model(tiny_folder(family), family, options,
                                source=mask if family in ENCODER_DECODER else None)
    causal = options.get("causal_mask", True)
    with torch.no_grad():
        written, maps = ours.greedy_decode(ids, 6, attention_mask=mask, **options)
        generated = reference.generate(ids, attention_mask=mask, max_new_tokens=6, num_beams=1, do_sample=False,
                                       use_cache=causal)
    start = 1 if family in ENCODER_DECODER else ids.size(1)
    assert written.tolist() == generated[:, start:].tolist()
    with torch.no_grad():
        _, default = ours.greedy_decode(ids, 6, attention_mask=mask)
    assert any(maps[k].shape != default[k].shape or (maps[k] - default[k]).abs().max() > 1e-3 for k in maps)


# ----------------------------------------------------------------------------- invariants

@pytest.mark.parametrize("family", ALL)
def test_invariants_rows_sum_to_one_and_masked_weights_are_exactly_zero(tiny_folder, family):
    check_invariants(load_pretrained(tiny_folder(family)), family)


def check_invariants(ours, family):
    """Under every padding and causal switch: rows sum to 1, weights >= 0, future and pad keys exactly 0 when
    masked (and not 0 when not)."""
    ids, mask, decoder = batch(ours, family)
    padded = ~mask[1].bool()  # the second row's pad positions
    assert padded.any()
    causal_options = (True, False) if family != "bert" else (True,)
    for padding in (True, False):
        for causal in causal_options:
            with torch.no_grad():
                _, maps = ours.forward(ids, decoder, attention_mask=mask, padding_mask=padding, causal_mask=causal)
            for key, weights in maps.items():
                where = f"{key} padding={padding} causal={causal}"
                # every query here may see some key (the pads are at the end): every row sums to 1
                torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)), atol=1e-5, rtol=0,
                                           msg=where)
                assert (weights >= 0).all(), where
                if key.startswith("decoder.") and key.endswith("self_attn"):
                    future = weights.triu(1)  # the keys after each query
                    assert (future == 0).all() if causal else (future > 0).any(), where
                sees_source = key.startswith("encoder.") or key.endswith("cross_attn") or family in DECODERS
                if sees_source:
                    pad_columns = weights[1, ..., padded]  # the second row's weights on its pad keys
                    if padding:
                        assert (pad_columns == 0).all(), where
                    else:
                        assert (pad_columns > 0).any(), where
                    assert (weights[0] > 0).any(-1).all(), where  # the unpadded row: no row of zeros


# ----------------------------------------------------------------------------- bad calls

@pytest.mark.parametrize("family", ENCODER_DECODER)
def test_bad_calls_are_refused_with_a_message_before_any_work(tiny_folder, family, monkeypatch):
    ours = load_pretrained(tiny_folder(family))
    ids = ours.encode("the cat").ids[None]
    decoder = torch.tensor([[ours.start_id]])
    monkeypatch.setattr(ours.model, "forward", lambda *a, **k: pytest.fail("the model ran"))
    monkeypatch.setattr(ours.model, "get_encoder", lambda *a, **k: pytest.fail("the encoder ran"))
    for scale in ("foo", -1, 0, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="scale"):
            ours.forward(ids, decoder, scale=scale)
        with pytest.raises(ValueError, match="scale"):
            ours.greedy_decode(ids, 3, scale=scale)
    with pytest.raises(ValueError, match="give decoder_input_ids"):
        ours.forward(ids)


def test_an_encoder_writes_nothing_and_a_decoder_takes_no_second_input(tiny_folder, monkeypatch):
    bert = load_pretrained(tiny_folder("bert"))
    monkeypatch.setattr(bert.model, "forward", lambda *a, **k: pytest.fail("the model ran"))
    with pytest.raises(ValueError, match="encoder only"):
        bert.greedy_decode(bert.encode("the cat").ids[None], 3)
    gpt2 = load_pretrained(tiny_folder("gpt2"))
    ids = gpt2.encode("the cat").ids[None]
    with pytest.raises(ValueError, match="no decoder input"):
        gpt2.forward(ids, ids)


# ----------------------------------------------------------------------------- threads, random configurations

def test_two_threads_with_different_switches_on_one_model_each_get_their_own(tiny_folder):
    shared = load_pretrained(tiny_folder("marian"))  # every kind of map
    ids, mask, decoder = batch(shared, "marian")
    settings = {"plain": {}, "switched": {"scale": "none", "causal_mask": False, "padding_mask": False}}
    with torch.no_grad():
        alone = {name: shared.forward(ids, decoder, attention_mask=mask, **options)
                 for name, options in settings.items()}
    assert any(not torch.equal(alone["plain"][1][k], alone["switched"][1][k]) for k in alone["plain"][1])
    start = threading.Barrier(len(settings))
    mismatches, passes = [], []

    def work(name):
        start.wait()
        for _ in range(20):
            with torch.no_grad():
                logits, maps = shared.forward(ids, decoder, attention_mask=mask, **settings[name])
            passes.append(name)
            if not torch.equal(logits, alone[name][0]) or any(not torch.equal(maps[k], alone[name][1][k])
                                                              for k in alone[name][1]):
                mismatches.append(name)

    threads = [threading.Thread(target=work, args=(name,)) for name in settings]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(passes) == 40 and not mismatches


class Pieces:
    """All the random configurations' models need of a tokenizer: ids and their names."""

    def __init__(self, pad, eos):
        self.pad_token_id, self.eos_token_id = pad, eos

    def convert_ids_to_tokens(self, ids):
        return [str(i) for i in ids]


@pytest.mark.parametrize("seed", range(10))
def test_random_small_configurations_equal_eager(seed):
    """A Llama-class model (Llama or Qwen2 by turns) and a Marian model of random small shapes: heads 1-4, key/value
    heads dividing them, head width 2-16, 1-3 layers, 1-9 positions, the second row padded."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    V = 37
    heads = rng.randint(1, 4)
    kv = rng.choice([h for h in range(1, heads + 1) if heads % h == 0])
    head_dim = rng.choice(range(2, 17, 2))  # rotary positions need an even width
    llama_class = (transformers.LlamaConfig, transformers.LlamaForCausalLM) if seed % 2 == 0 else (
        transformers.Qwen2Config, transformers.Qwen2ForCausalLM)
    decoder_only = llama_class[0](vocab_size=V, hidden_size=heads * head_dim + rng.choice([0, 4]),
                                  num_hidden_layers=rng.randint(1, 3), num_attention_heads=heads,
                                  num_key_value_heads=kv, head_dim=head_dim, intermediate_size=16, bos_token_id=1,
                                  eos_token_id=2)
    heads = rng.randint(1, 4)
    d_model = heads * rng.randint(2, 16)  # any head width, odd ones too (sinusoidal positions of odd widths)
    marian = transformers.MarianConfig(vocab_size=V, d_model=d_model, encoder_layers=rng.randint(1, 3),
                                       decoder_layers=rng.randint(1, 3), encoder_attention_heads=heads,
                                       decoder_attention_heads=heads, encoder_ffn_dim=16, decoder_ffn_dim=16,
                                       pad_token_id=0, eos_token_id=2, decoder_start_token_id=0,
                                       max_position_embeddings=16)
    for family, cls, config in (("llama", llama_class[1], decoder_only),
                                ("marian", transformers.MarianMTModel, marian)):
        reference = cls(config).eval()
        reference.set_attn_implementation("eager")
        ours = PretrainedTransformer(copy.deepcopy(reference), Pieces(pad=0, eos=2))
        S = rng.randint(1, 9)
        ids = torch.randint(3, V, (2, S))
        mask = torch.ones(2, S, dtype=torch.long)
        mask[1, rng.randint(1, S):] = 0  # the second row padded at the end (when it has more than one position)
        ids[mask == 0] = 0
        decoder = None
        if family == "marian":
            decoder = torch.randint(3, V, (2, rng.randint(1, 9)))
            decoder[:, 0] = 0
        with torch.no_grad():
            logits, maps = ours.forward(ids, decoder, attention_mask=mask)
        assert_same(maps, logits, transformers_pass(reference, ids, mask, decoder), family, 2e-6, 1e-5)
