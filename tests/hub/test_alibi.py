"""ALiBi outside transformers' attention interface, routed through it (hub.routes): MPT's (built once for its
max_seq_len positions, m_h·(j − (K − 1))) and Falcon-RW's (added twice by its eager attention: (QKᵀ + A)/√d_k and
A/√d_k folded into its mask), and Falcon-7B's rotary attention (no bias). Tiny models built from their configs and
saved offline (devtools.tiny_archs; Falcon-RW is the tiny Falcon with `alibi` on). Each is proven on load; its maps
and logits equal transformers' eager model; B is kept per map key as the model computes it; position_bias=False
equals eager with its ALiBi zeroed; heads off equal W_O's columns zeroed; greedy decoding writes what `generate`
writes; the causal mask switched off runs (MPT's model reads its mask as a tensor)."""

from __future__ import annotations

import contextlib
import copy
import json
import math
from unittest import mock

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from attention_viz.core.variation import Variation  # noqa: E402
from attention_viz.hub import load_pretrained  # noqa: E402
from attention_viz.hub.long_kept import LongRunError  # noqa: E402
from devtools import tiny_archs  # noqa: E402

TEXTS = ("Attention is all you need.", "Hi there")


def loaded(kind: str, tmp_path):
    """(ours, theirs: the same folder under eager attention) for "mpt", "falcon" (rotary) or "falcon_rw" (ALiBi)."""
    folder = tiny_archs.save("mpt" if kind == "mpt" else "falcon", tmp_path / kind)
    if kind == "falcon_rw":
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "alibi": True}))
    theirs = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    return load_pretrained(folder), theirs


def batch(ours):
    rows = [ours.encode(text).ids for text in TEXTS]
    ids = torch.full((2, max(len(r) for r in rows)), ours.pad_id if ours.pad_id is not None else 0, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = r, 1
    return ids, mask


def eager(model, ids, mask):
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True, use_cache=False)
    return out.logits, {f"decoder.{i}.self_attn": a for i, a in enumerate(out.attentions)}


def assert_real_rows(ours, mask, logits, maps, reference) -> None:
    """Equal where a query is a real token (a padded query's row is no text: hub.proof leaves it out too)."""
    keep = mask.bool()
    torch.testing.assert_close(logits[keep], reference[0][keep], atol=1e-4, rtol=1e-4)
    rows = keep[:, None, :].expand(-1, ours.n_heads, -1)
    for key, expected in reference[1].items():
        torch.testing.assert_close(maps[key][rows], expected[rows], atol=1e-5, rtol=0, msg=key)


@contextlib.contextmanager
def alibi_zeroed(kind: str, model):
    """The model's ALiBi all 0 while the block runs: MPT's build_mpt_alibi_tensor (a method of its model), Falcon's
    build_alibi_tensor (a function of its module)."""
    if kind == "mpt":
        model.transformer.build_mpt_alibi_tensor = lambda heads, length, *a, device=None, **k: torch.zeros(
            heads, 1, length, device=device)
        yield model
        return
    from transformers.models.falcon import modeling_falcon

    with mock.patch.object(modeling_falcon, "build_alibi_tensor", lambda m, heads, dtype: torch.zeros(
            m.size(0) * heads, 1, m.size(1), dtype=dtype)):
        yield model


def expected_bias(kind: str, ours, mask) -> torch.Tensor:
    """B as each model adds it: MPT [1, H, 1, K], Falcon-RW [B, H, 1, K] (its rows are the same for every query)."""
    H, K = ours.n_heads, mask.size(1)
    if kind == "mpt":  # MPT's slopes 1/2^(8h/H) (H a power of two), over positions 1 - K .. 0
        slopes = torch.tensor([1 / 2 ** (8 * (h + 1) / H) for h in range(H)])
        return (slopes[:, None] * torch.arange(1 - K, 1).float())[None, :, None, :]
    slopes = torch.tensor([2 ** (-8 * (h + 1) / H) for h in range(H)])  # Bloom's slopes, Falcon's build
    positions = ((mask.cumsum(-1) - 1) * mask).float()  # (B, K): a row's real tokens counted
    A = (slopes[None, :, None] * positions[:, None, :]).to(torch.bfloat16).float()  # Falcon rounds to bfloat16
    return 2 * A[:, :, None, :] / math.sqrt(ours.d_k)  # (QKᵀ + A)/√d_k + A/√d_k, less QKᵀ/√d_k


@pytest.mark.parametrize("kind", ["mpt", "falcon_rw", "falcon"])
def test_alibi_and_falcons_rotary_attention_routed_through_our_eq1_as_their_eager_attention_computes_them(
        kind, tmp_path):
    ours, theirs = loaded(kind, tmp_path)
    biased = kind != "falcon"
    assert ours.fidelity.proven and ours.abilities.position_bias == biased, ours.fidelity
    assert ("with its position bias" in str(ours.fidelity)) == biased
    ids, mask = batch(ours)
    recorded = ours.traced(ids, attention_mask=mask)
    assert_real_rows(ours, mask, recorded.logits, recorded.maps, eager(theirs, ids, mask))
    if not biased:
        assert not recorded.biases
    else:
        assert sorted(recorded.biases) == ours.map_keys
        bias = recorded.biases["decoder.0.self_attn"]
        expected = expected_bias(kind, ours, mask)
        if kind == "falcon_rw":  # folded into its mask: the cells a query may attend hold it
            allowed = recorded.run.masks["decoder.0.self_attn"].expand_as(bias)
            bias, expected = bias[allowed], expected.expand_as(allowed)[allowed]
        torch.testing.assert_close(bias, expected, atol=1e-6, rtol=1e-6)

        off = ours.traced(ids, attention_mask=mask, variation=Variation(position_bias=False))
        flat = copy.deepcopy(theirs)
        with alibi_zeroed(kind, flat):
            reference = eager(flat, ids, mask)
        assert_real_rows(ours, mask, off.logits, off.maps, reference)
        assert float((off.logits - recorded.logits).abs().max()) > 1e-3 and not off.biases
        with pytest.raises(LongRunError, match="position bias"):  # the long pass computes no bias: said, not wrong
            ours.long_run(TEXTS[0])

    cut = copy.deepcopy(theirs)
    with torch.no_grad():
        for key, w_o_name, _ in ours.family.w_o:
            cut.get_submodule(w_o_name).weight[:, ours.d_k:2 * ours.d_k] = 0  # head 1
    logits, maps = ours.forward(ids, attention_mask=mask, heads_off={key: [1] for key in ours.map_keys})
    assert_real_rows(ours, mask, logits, maps, eager(cut, ids, mask))

    lifted = ours.traced(ids[:1], variation=Variation(causal_mask=False))  # no mask at all: MPT's reads a tensor
    assert float(lifted.maps["decoder.0.self_attn"].triu(1).max()) > 0

    src = ids[:1, : int(mask[0].sum())]
    with torch.no_grad():
        expected_tokens = theirs.generate(src, attention_mask=torch.ones_like(src), max_new_tokens=5,
                                          do_sample=False, num_beams=1)[:, src.size(1):]
    for reuse_keys in (True, False):
        written, _ = ours.greedy_decode(src, 5, reuse_keys=reuse_keys)
        assert written.tolist() == expected_tokens[:, : written.size(1)].tolist() and written.size(1) > 0
