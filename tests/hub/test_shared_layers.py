"""Layers that share one attention module (ALBERT: one layer's weights run N times): a map per run, layer by layer as
transformers counts them (its `attentions`), each run its own key; heads off per run (one layer's head, not every
run of the module); the long pass keeps each run apart. A tiny ALBERT built from its config (devtools.tiny_archs),
proven on load against its eager attention."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from attention_viz.hub import PretrainedTransformer  # noqa: E402
from devtools import tiny_archs  # noqa: E402

TEXTS = ("the cat sat on the mat", "hi there")


@pytest.fixture(scope="module")
def albert():
    model, tokenizer = tiny_archs.tiny("albert")
    assert model.config.num_hidden_groups == 1 and model.config.num_hidden_layers >= 2  # one module, run N times
    return PretrainedTransformer(model, tokenizer, name="tiny-albert")


def batch(ours):
    rows = [ours.encode(text).ids for text in TEXTS]
    ids = torch.full((2, max(len(r) for r in rows)), ours.pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    return ids, (ids != ours.pad_id).long()


def test_a_shared_attention_module_gives_a_map_per_run_as_transformers_counts_its_layers(albert):
    N = albert.model.config.num_hidden_layers
    assert albert.fidelity.proven and albert.map_keys == [f"encoder.{i}.self_attn" for i in range(N)]
    assert len({name for name, _ in albert.family.keys}) == 1  # every key is a run of the same module
    ids, mask = batch(albert)
    with torch.no_grad():
        eager = albert.model(input_ids=ids, attention_mask=mask, output_attentions=True)
    logits, maps = albert.forward(ids, attention_mask=mask)
    keep = mask.bool()
    torch.testing.assert_close(logits[keep], eager.logits[keep], atol=1e-5, rtol=1e-5)
    rows = keep[:, None, :].expand(-1, albert.n_heads, -1)
    for i, theirs in enumerate(eager.attentions):
        torch.testing.assert_close(maps[f"encoder.{i}.self_attn"][rows], theirs[rows], atol=1e-6, rtol=0)
    assert float((maps["encoder.0.self_attn"] - maps["encoder.1.self_attn"]).abs().max()) > 1e-3  # runs differ


def test_heads_off_in_one_run_of_a_shared_module_leave_its_other_runs_on(albert):
    """Reference: transformers' eager model with head 1's slice of W_O's input zeroed in the second run only (the
    module's weights are every run's, so zeroing W_O's columns would switch it off in all of them)."""
    ids, mask = batch(albert)
    key, w_o_name, _ = albert.family.w_o[1]
    w_o, d, runs = albert.model.get_submodule(w_o_name), albert.d_k, [0]

    def second_run_only(module, args):
        runs[0] += 1
        if runs[0] == 2:
            x = args[0].clone()
            x[..., d:2 * d] = 0  # head 1 of the second run
            return (x,)
        return None

    hook = w_o.register_forward_pre_hook(second_run_only)
    try:
        with torch.no_grad():
            reference = albert.model(input_ids=ids, attention_mask=mask).logits
    finally:
        hook.remove()
    assert key == "encoder.1.self_attn" and runs[0] == albert.model.config.num_hidden_layers
    logits, maps = albert.forward(ids, attention_mask=mask, heads_off={key: [1]})
    keep = mask.bool()
    torch.testing.assert_close(logits[keep], reference[keep], atol=1e-5, rtol=1e-5)
    on, _ = albert.forward(ids, attention_mask=mask)
    assert float((logits - on).abs().max()) > 1e-4  # it acts ...
    _, first_off = albert.forward(ids, attention_mask=mask, heads_off={"encoder.0.self_attn": [1]})
    assert float((first_off["encoder.1.self_attn"] - maps["encoder.1.self_attn"]).abs().max()) > 1e-4  # ... per run


def test_the_long_pass_keeps_each_run_of_a_shared_module_apart(albert):
    ids = albert.encode(TEXTS[0]).ids[None]  # (1, T)
    _, maps = albert.forward(ids, attention_mask=torch.ones_like(ids))
    run = albert.long_run(ids)
    try:
        assert run.keys == albert.map_keys
        T = ids.size(1)
        for key in run.keys:
            region = run.region(key, 2, slice(0, T), slice(0, T))
            torch.testing.assert_close(torch.as_tensor(region).double(), maps[key][0, 2].double(), atol=1e-5, rtol=0)
    finally:
        run.close()
