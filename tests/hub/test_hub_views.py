"""A real model in the notebook view and the standalone page (explorer.notebook.show), and on a CUDA GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

import attention_viz as av  # noqa: E402
from attention_viz.core.variation import Variation  # noqa: E402
from attention_viz.explorer import unpack  # noqa: E402
from attention_viz.hub.text_run import run_text  # noqa: E402


@pytest.mark.parametrize("family, kinds", [("marian", ["encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"]),
                                           ("bert", ["encoder.self_attn"]), ("qwen2", ["decoder.self_attn"])])
def test_show_draws_a_real_models_maps_with_its_own_pieces(tiny_folders, tmp_path, family, kinds):
    model = av.load_pretrained(tiny_folders[family])
    view = av.show(model, "the cat sat on the mat", scale="none", causal_mask=False)
    payload = view.payload
    assert [k["kind"] for k in payload["kinds"]] == kinds
    assert f"Our Eq. 1 inside it: {model.fidelity}." in payload["notes"]  # the proof on load beside its name
    result = run_text(model, "the cat sat on the mat", max_new_tokens=40,
                      variation=Variation("none", causal_mask=False))
    maps, masks = unpack(payload)
    for key, weights in result.maps.items():
        np.testing.assert_allclose(maps[key], weights, atol=1e-5)  # the packed maps are the run's (uint16 steps)
    tokens = payload["tokens"]["source"] or payload["tokens"]["target"]
    assert tokens == list(result.src_tokens or result.tgt_tokens)
    if "decoder.self_attn" in kinds:  # the causal mask off: each decode step's own maps come along
        assert payload["decode"]["per_step"] and masks["decoder.self_attn"].all()
    with torch.no_grad():  # what flows: the packed maps x the packed norms
        flows = model.value_flows(*[torch.tensor([list(ids)]) for ids in (result.src_ids, result.tgt_ids) if ids],
                                  scale="none", causal_mask=False)
    for entry in payload["kinds"]:
        stack, name = entry["kind"].split(".")
        for layer, norms in enumerate(entry["norms"]):
            key = f"{stack}.{layer}.{name}"
            np.testing.assert_allclose(result.maps[key] * np.array(norms)[:, None, :], flows[key][0].numpy(),
                                       rtol=1e-3, atol=1e-6)
    page = view.save(tmp_path / f"{family}.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "http://" not in page and "https://" not in page.split("<script")[0]


def test_show_refuses_an_empty_text_on_a_real_model(tiny_folders):
    model = av.load_pretrained(tiny_folders["gpt2"])
    with pytest.raises(ValueError, match="non-empty string"):
        av.show(model, "")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
@pytest.mark.parametrize("family", ["marian", "llama"])
def test_on_a_cuda_gpu_the_maps_and_tokens_equal_the_cpus(tiny_folders, family):
    cpu, gpu = av.load_pretrained(tiny_folders[family], device="cpu"), av.load_pretrained(tiny_folders[family],
                                                                                           device="cuda")
    src = cpu.encode("attention is all you need").ids[None]
    written_cpu, maps_cpu = cpu.greedy_decode(src, 6)
    written_gpu, maps_gpu = gpu.greedy_decode(src.cuda(), 6)
    assert written_gpu.cpu().tolist() == written_cpu.tolist()
    for key in maps_cpu:
        torch.testing.assert_close(maps_gpu[key].cpu(), maps_cpu[key], atol=1e-5, rtol=0)
