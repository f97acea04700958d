"""DeBERTa v2/v3's disentangled attention through our Eq. 1 (hub.routes): scores = c2c + c2p + p2c, each over
√(d·f), the content-to-content term QKᵀ as Eq. 1's, the position terms handed over as its position bias and each kept
apart (Recorded.terms). Tiny models of both layouts, built from their configs and saved offline (devtools.tiny_archs:
v3's shared projections and log buckets; v2's own position projections, no buckets). Each is proven on load; its maps
and logits equal transformers' eager model; each term equals what its eager attention computes, and their sum is the
map's logits; position_bias=False equals eager with no position terms; the padding switch and heads off act."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from attention_viz.core.variation import Variation  # noqa: E402
from attention_viz.hub import load_pretrained  # noqa: E402
from devtools import tiny_archs  # noqa: E402

TEXTS = ("Attention is all you need, said the paper.", "Hi there")
LAYOUTS = {  # over tiny_archs.QUIRKS' v3 layout
    "v3": {},
    "v2": {"relative_attention": True, "pos_att_type": ["c2p", "p2c"], "position_buckets": -1,
           "share_att_key": False, "norm_rel_ebd": "none"},
}


@pytest.fixture(params=list(LAYOUTS))
def models(request, tmp_path, monkeypatch):
    """(ours, theirs in eager attention, the layout's name) of one DeBERTa layout."""
    if LAYOUTS[request.param]:
        monkeypatch.setitem(tiny_archs.QUIRKS, "deberta-v2", LAYOUTS[request.param])
    ours = load_pretrained(tiny_archs.save("deberta-v2", tmp_path / request.param))
    theirs, _ = tiny_archs.tiny("deberta-v2")
    return ours, theirs, request.param


def batch(ours):
    rows = [ours.encode(text).ids for text in TEXTS]
    ids = torch.full((2, max(len(r) for r in rows)), ours.pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    return ids, (ids != ours.pad_id).long()


def eager(model, ids, mask):
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    return out.logits, {f"encoder.{i}.self_attn": a for i, a in enumerate(out.attentions)}


def assert_real_rows(ours, mask, logits, maps, reference) -> None:
    keep = mask.bool()  # a padded query's row is no text (hub.proof leaves it out too)
    torch.testing.assert_close(logits[keep], reference[0][keep], atol=1e-4, rtol=1e-4)
    rows = keep[:, None, :].expand(-1, ours.n_heads, -1)
    for key, expected in reference[1].items():
        torch.testing.assert_close(maps[key][rows], expected[rows], atol=1e-5, rtol=0, msg=key)


def eager_terms(model, ids, mask) -> list[dict[str, torch.Tensor]]:
    """Per layer, the terms DeBERTa's eager attention sums, from its own module's code: c2c = q·(k/√(d·f)), and
    disentangled_attention_bias with one position term at a time, [B, H, Q, K] each."""
    found = []

    def hook(module, args, kwargs, _output):
        hidden, relative_pos, rel = args[0], kwargs.get("relative_pos"), kwargs.get("rel_embeddings")
        H = module.num_attention_heads
        q = module.transpose_for_scores(module.query_proj(hidden), H)
        k = module.transpose_for_scores(module.key_proj(hidden), H)
        f = 1 + len(module.pos_att_type)
        scale = (q.size(-1) * f) ** 0.5
        terms = {"c2c": torch.bmm(q, k.transpose(-1, -2) / scale)}
        kinds = module.pos_att_type
        for name in ("c2p", "p2c"):
            module.pos_att_type = [name]  # one term at a time (this copy's module only)
            terms[name] = module.disentangled_attention_bias(q, k, relative_pos, rel, f)
        module.pos_att_type = kinds
        found.append({name: t.view(ids.size(0), H, *t.shape[-2:]) for name, t in terms.items()})

    model = copy.deepcopy(model)
    for module in model.modules():
        if type(module).__name__ == "DisentangledSelfAttention":
            module.register_forward_hook(hook, with_kwargs=True)
    eager(model, ids, mask)
    return found


def test_debertas_disentangled_attention_through_our_eq1_each_term_kept(models):
    ours, theirs, layout = models
    assert ours.fidelity.proven and ours.abilities.position_bias and "with its position bias" in str(ours.fidelity)
    assert ours.layout == "encoder" and ours.factor == pytest.approx((3 * ours.d_k) ** -0.5)  # 1/√(d·f), f = 3
    ids, mask = batch(ours)
    recorded = ours.traced(ids, attention_mask=mask)
    assert_real_rows(ours, mask, recorded.logits, recorded.maps, eager(theirs, ids, mask))

    allowed = (mask[:, None, :, None] * mask[:, None, None, :]).bool().expand(-1, ours.n_heads, -1, -1)
    for key, expected in zip(ours.map_keys, eager_terms(theirs, ids, mask)):
        terms = recorded.terms[key]
        assert list(terms) == ["c2c", "c2p", "p2c"]
        for name, term in terms.items():  # each as its eager attention computes it
            torch.testing.assert_close(term[allowed], expected[name][allowed], atol=1e-5, rtol=1e-5, msg=name)
        torch.testing.assert_close(recorded.biases[key], terms["c2p"] + terms["p2c"])
        logits = sum(terms.values()).masked_fill(~allowed, float("-inf"))  # their sum is the map's logits
        rows = mask.bool()[:, None, :].expand(-1, ours.n_heads, -1)
        torch.testing.assert_close(logits.softmax(-1)[rows], recorded.maps[key][rows], atol=1e-6, rtol=0)
    assert float(recorded.terms[ours.map_keys[0]]["p2c"].detach().abs().max()) > 1e-3  # the terms are not trivially 0

    off = ours.traced(ids, attention_mask=mask, variation=Variation(position_bias=False))
    flat = copy.deepcopy(theirs)
    for module in flat.modules():
        if type(module).__name__ == "DisentangledSelfAttention":
            module.disentangled_attention_bias = lambda *args, **kwargs: 0  # c2c alone, over √(d·f) still
    assert_real_rows(ours, mask, off.logits, off.maps, eager(flat, ids, mask))
    assert not off.biases and not off.terms

    bare = ours.traced(ids, attention_mask=mask, variation=Variation(padding_mask=False))  # its own mask: lifted
    unmasked = copy.deepcopy(theirs)  # its attention's mask all ones (its embeddings still zero the pads)
    encoder = unmasked.deberta.encoder
    encoder.get_attention_mask = lambda m, _own=encoder.get_attention_mask: _own(torch.ones_like(m))
    assert_real_rows(ours, mask, bare.logits, bare.maps, eager(unmasked, ids, mask))
    assert float(bare.maps[ours.map_keys[0]][1, :, 0, -1].min()) > 0  # a pad key gets weight

    cut = copy.deepcopy(theirs)
    with torch.no_grad():
        for key, w_o_name, _ in ours.family.w_o:
            cut.get_submodule(w_o_name).weight[:, ours.d_k:2 * ours.d_k] = 0  # head 1
    logits, maps = ours.forward(ids, attention_mask=mask, heads_off={key: [1] for key in ours.map_keys})
    assert_real_rows(ours, mask, logits, maps, eager(cut, ids, mask))


def eager_v1_terms(model, ids, mask) -> list[dict[str, torch.Tensor]]:
    """Per layer, the terms DeBERTa v1's eager attention sums, from its own module's code: c2c = (q/√(d·f))·k (q with
    its q_bias), and disentangled_att_bias with one position term at a time, [B, H, Q, K] each."""
    found = []

    def hook(module, args, kwargs, _output):
        hidden, relative_pos, rel = args[0], kwargs.get("relative_pos"), kwargs.get("rel_embeddings")
        q, k, _ = module.transpose_for_scores(module.in_proj(hidden)).chunk(3, dim=-1)
        q = q + module.transpose_for_scores(module.q_bias[None, None, :])
        f = 1 + len(module.pos_att_type)
        q = q / (q.size(-1) * f) ** 0.5
        terms = {"c2c": q @ k.transpose(-1, -2)}
        kinds = module.pos_att_type
        for name in ("c2p", "p2c"):
            module.pos_att_type = [name]  # one term at a time (this copy's module only)
            terms[name] = module.disentangled_att_bias(q, k, relative_pos, rel, f)
        module.pos_att_type = kinds
        found.append(terms)

    model = copy.deepcopy(model)
    for module in model.modules():
        if type(module).__name__ == "DisentangledSelfAttention":
            module.register_forward_hook(hook, with_kwargs=True)
    eager(model, ids, mask)
    return found


def test_deberta_v1s_disentangled_attention_through_our_eq1_each_term_kept(tmp_path):
    """DeBERTa v1 (`deberta`: one in_proj, q_bias and v_bias, relative embeddings within att_span): proven on load,
    each term as its eager attention computes it, maps and logits equal eager's, the position bias off equals eager
    with no position terms."""
    ours = load_pretrained(tiny_archs.save("deberta", tmp_path / "v1"))
    theirs, _ = tiny_archs.tiny("deberta")
    assert ours.fidelity.proven and ours.abilities.position_bias
    assert ours.factor == pytest.approx((3 * ours.d_k) ** -0.5)
    ids, mask = batch(ours)
    recorded = ours.traced(ids, attention_mask=mask)
    assert_real_rows(ours, mask, recorded.logits, recorded.maps, eager(theirs, ids, mask))
    allowed = (mask[:, None, :, None] * mask[:, None, None, :]).bool().expand(-1, ours.n_heads, -1, -1)
    for key, expected in zip(ours.map_keys, eager_v1_terms(theirs, ids, mask)):
        terms = recorded.terms[key]
        assert list(terms) == ["c2c", "c2p", "p2c"]
        for name, term in terms.items():
            torch.testing.assert_close(term[allowed], expected[name][allowed], atol=1e-5, rtol=1e-5, msg=name)
        assert float(terms["p2c"].detach().abs().max()) > 1e-3 and float(terms["c2p"].detach().abs().max()) > 1e-3
    off = ours.traced(ids, attention_mask=mask, variation=Variation(position_bias=False))
    flat = copy.deepcopy(theirs)
    for module in flat.modules():
        if type(module).__name__ == "DisentangledSelfAttention":
            module.disentangled_att_bias = lambda *args, **kwargs: 0  # c2c alone, over √(d·f) still
    assert_real_rows(ours, mask, off.logits, off.maps, eager(flat, ids, mask))


def test_deberta_with_talking_heads_is_refused_by_what_it_does():
    from transformers import DebertaConfig

    from attention_viz.hub.families import UnsupportedModelError, family_of

    with pytest.raises(UnsupportedModelError, match="talking heads.*mixed with the other heads'"):
        family_of(DebertaConfig(talking_head=True))
