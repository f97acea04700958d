"""Placement by accelerate (load_pretrained's device_map and offload_folder): a model spread over the CPU and disk
gives the maps and logits of the model loaded whole, bit for bit in float32, under the proof on load, heads off and
the long pass; a placement that cannot be is refused before any weight is read, naming what to change."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import transformers

from attention_viz.core.variation import Variation
from attention_viz.hub import load_pretrained
from attention_viz.hub.families import ModelRefusedError
from attention_viz.hub.loading import model_class
from attention_viz.hub.placement import check_placement, input_device, weights

pytest.importorskip("accelerate")

LAYER = re.compile(r"^(.*\.(?:layers|h|layer)\.(\d+))\.")


def split(folder) -> dict:
    """A device map of the model in `folder`: its even layers on the CPU, its odd layers and everything else (the
    embeddings, the output head) on disk."""
    config = transformers.AutoConfig.from_pretrained(folder)
    from accelerate import init_empty_weights

    with init_empty_weights():
        empty = model_class(config).from_config(config)
    device_map = {}
    for name, _ in list(empty.named_parameters()) + list(empty.named_buffers()):
        layer = LAYER.match(name)
        if layer:
            device_map[layer.group(1)] = "cpu" if int(layer.group(2)) % 2 == 0 else "disk"
        else:
            device_map[name.rsplit(".", 1)[0] if "." in name else name] = "disk"  # BART's final_logits_bias by name
    return device_map


@pytest.fixture(scope="module")
def whole(tiny_folder):
    """family -> its tiny model loaded whole in memory (float32, CPU), once."""
    loaded = {}

    def get(family):
        if family not in loaded:
            loaded[family] = load_pretrained(tiny_folder(family), device="cpu")
        return loaded[family]

    return get


def inputs(model, family):
    """A batch of two texts (one padded) and, for an encoder-decoder model, a decoder input."""
    ids = torch.randint(5, 60, (2, 9), generator=torch.Generator().manual_seed(3))  # (2, 9)
    if model.pad_id is not None:
        ids[1, 6:] = model.pad_id
    decoder = torch.randint(5, 60, (2, 5), generator=torch.Generator().manual_seed(4)) if family in (
        "bart", "marian") else None  # (2, 5)
    return ids, decoder


def assert_same_pass(placed, whole, family, **switches):
    """forward of the placed model equals the whole model's: logits and every map, bit for bit."""
    ids, decoder = inputs(whole, family)
    logits, maps = whole.forward(ids, decoder, **switches)
    placed_logits, placed_maps = placed.forward(ids, decoder, **switches)
    assert torch.equal(placed_logits, logits)
    assert placed_maps.keys() == maps.keys() and len(maps) > 0
    for key in maps:
        assert torch.equal(placed_maps[key], maps[key]), key


@pytest.mark.parametrize("family", ["llama", "gpt2", "bart"])
def test_layers_split_between_the_cpu_and_disk_equal_the_model_in_memory(tiny_folder, whole, tmp_path, family):
    """Even layers on the CPU, odd layers, the embeddings and the output head on disk: the proof on load passes with
    the same figures, forward and heads off (zeroed and mean-ablated) give the whole model's logits and maps."""
    device_map = split(tiny_folder(family))
    assert "disk" in device_map.values() and "cpu" in device_map.values()
    placed = load_pretrained(tiny_folder(family), device_map=device_map, offload_folder=tmp_path / "offload")
    assert any(p.device.type == "meta" for p in placed.model.parameters())  # layers really offloaded
    assert placed.device == torch.device("cpu") == input_device(placed.model)
    assert placed.fidelity == whole(family).fidelity
    assert_same_pass(placed, whole(family), family)
    first = placed.map_keys[0]
    assert_same_pass(placed, whole(family), family, heads_off={first: [0, 1]})
    assert_same_pass(placed, whole(family), family, variation=Variation("none", heads_off={first: (1,)}))
    torch.testing.assert_close(placed.w_o(first), whole(family).w_o(first), rtol=0, atol=0)  # read from disk
    ids, _ = inputs(whole(family), family)
    if placed.abilities.writes_text:  # greedy decoding: the same tokens and maps
        out, maps = placed.greedy_decode(ids[:1], max_new_tokens=4)
        expected, expected_maps = whole(family).greedy_decode(ids[:1], max_new_tokens=4)
        assert torch.equal(out, expected) and all(torch.equal(maps[k], expected_maps[k]) for k in expected_maps)


@pytest.mark.parametrize("device_map", [{"": "cpu"}, "cpu", "auto", "sequential"])
def test_a_cpu_only_placement_equals_the_model_in_memory(tiny_folder, whole, device_map):
    """The whole model on the CPU by a map, by a device's name, and accelerate's own strategies (no GPU here)."""
    placed = load_pretrained(tiny_folder("llama"), device_map=device_map)
    assert placed.fidelity == whole("llama").fidelity
    assert_same_pass(placed, whole("llama"), "llama")


def test_the_long_pass_under_disk_offload_equals_the_model_in_memory(tiny_folder, whole, tmp_path):
    """long_run on a model with layers on disk: the logits, every head's overview and a region as in memory."""
    placed = load_pretrained(tiny_folder("llama"), device_map=split(tiny_folder("llama")), offload_folder=tmp_path)
    ids = torch.randint(5, 60, (1, 70), generator=torch.Generator().manual_seed(5))  # (1, 70)
    ours, theirs = placed.long_run(ids, rows=16), whole("llama").long_run(ids, rows=16)
    assert torch.equal(ours.logits, theirs.logits)
    for key in placed.map_keys:
        for head in range(placed.n_heads):
            assert (ours.overview(key, head, size=7) == theirs.overview(key, head, size=7)).all()
            assert (ours.region(key, head, slice(40, 70), slice(0, 70))
                    == theirs.region(key, head, slice(40, 70), slice(0, 70))).all()


def test_half_precision_under_a_placement_passes_the_proof(tiny_folder, tmp_path):
    """bfloat16 with layers on disk: the proof on load passes, and forward runs in bfloat16 as the model loaded
    whole in bfloat16 does, bit for bit."""
    folder = tiny_folder("llama")
    placed = load_pretrained(folder, device_map=split(folder), offload_folder=tmp_path, dtype=torch.bfloat16)
    in_memory = load_pretrained(folder, device="cpu", dtype=torch.bfloat16)
    assert placed.fidelity == in_memory.fidelity
    assert_same_pass(placed, in_memory, "llama")


def test_an_offloaded_weight_that_is_not_finite_is_refused(tiny_folder, tmp_path):
    """The check of the weights' values reads the offloaded ones from disk (no weight left unread)."""
    from attention_viz.hub.loading import check_model

    folder = tiny_folder("gpt2")
    model = model_class(transformers.AutoConfig.from_pretrained(folder)).from_pretrained(
        folder, device_map=split(folder), offload_folder=tmp_path)
    names = [name for name, _ in weights(model)]
    assert set(names) >= {name for name, _ in model.named_parameters()}
    hook = model.transformer.h[1].mlp.c_fc._hf_hook
    hook.weights_map = {"weight": hook.weights_map["weight"].clone().fill_(float("nan")),
                        "bias": hook.weights_map["bias"]}
    with pytest.raises(ModelRefusedError, match=r"not finite .* in transformer\.h\.1\.mlp\.c_fc\.weight"):
        check_model(model, {}, "tiny-gpt2")


@pytest.fixture
def no_weights_read(monkeypatch):
    """Any attempt to build the model from its weights fails the test (a refusal must come first)."""
    read = []

    def refuse(cls, *args, **kwargs):
        read.append(cls.__name__)
        raise AssertionError("weights read")

    monkeypatch.setattr(transformers.PreTrainedModel, "from_pretrained", classmethod(refuse))
    yield read
    assert read == []


@pytest.mark.parametrize(("keywords", "message"), [
    (dict(device_map={"": "cuda:3"}), r"placed on 'cuda:3', but this machine has no CUDA GPU; map it to a device"),
    (dict(device_map="cuda:3"), r"placed on 'cuda:3', but this machine has no CUDA GPU"),
    (dict(device_map={"": 3}), r"placed on 3, but this machine has no CUDA GPU"),
    (dict(device_map={"": "gpu7"}), r"'gpu7' is not a device torch knows"),
    (dict(device_map={"": "cpu", "model.decoder": "disk"}, offload_folder="x"),
     r"names 'model.decoder', which is no module of this model \(its modules include 'lm_head', 'model'"),
    (dict(device_map={"model.layers": "cpu"}), r"gives model.embed_tokens.weight no place \(nor 2 more"),
    (dict(device_map={"": "disk"}), r"puts layers on 'disk' but no offload_folder was given"),
    (dict(device_map=["cpu"]), r"device_map \['cpu'\] is none of"),
    (dict(device_map={"": "cpu"}, dtype=torch.float8_e4m3fn), r"cpu cannot compute in torch.float8_e4m3fn"),
    (dict(dtype=torch.int8), r"its weights cannot be torch.int8 \(use torch.float32"),
    (dict(device="cuda"), r"CUDA is not available here"),
])
def test_a_placement_that_cannot_be_is_refused_before_any_weight_is_read(tiny_folder, no_weights_read, keywords,
                                                                        message):
    if torch.cuda.device_count() > 0:
        pytest.skip("these refusals name devices that a machine with a GPU may have")
    with pytest.raises(ModelRefusedError, match=r"^The model 'tiny-llama' was refused: .*" + message):
        load_pretrained(tiny_folder("llama"), **keywords)


def test_an_offload_folder_that_cannot_be_written_is_refused(tiny_folder, tmp_path, no_weights_read):
    """A folder under a file (so it cannot be made, even by root) and a folder with no write permission."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(ModelRefusedError, match=r"offload folder 'offload' cannot be written \(.*\); name a folder"):
        load_pretrained(tiny_folder("llama"), device_map={"": "disk"}, offload_folder=blocked / "offload")
    assert not (blocked / "offload").exists()


def test_placement_checks_build_the_model_on_the_meta_device_only(tiny_folder):
    """check_placement on a model's config alone (no folder read beyond its config): a good map passes and comes
    back as transformers takes it; a device alone becomes {"": device}."""
    config = transformers.AutoConfig.from_pretrained(tiny_folder("llama"))
    auto = model_class(config)
    good = {"model.embed_tokens": "cpu", "model.layers": "cpu", "model.norm": "cpu", "lm_head": "cpu",
            "model.rotary_emb": "cpu"}
    assert check_placement(good, None, torch.float32, auto, config) == good
    assert check_placement("cpu", None, torch.bfloat16, auto, config) == {"": "cpu"}
    assert check_placement("auto", None, torch.float16, auto, config) == "auto"
    with pytest.raises(ValueError, match="no module of this model"):
        check_placement({"model.layers.2": "cpu", "": "cpu"}, None, torch.float32, auto, config)  # 2 layers: 0, 1


def test_head_importance_under_disk_offload_agrees_with_the_model_in_memory(tiny_folder, whole, tmp_path):
    """Every head off alone and Michel's gradient on a model with layers on disk: the figures of the model in memory
    to float32's rounding (the model in memory scores through its linear output head block by block, the placed one
    through its logits, as hooked heads are), the same ranking's agreement."""
    from attention_viz.importance.real import real_head_importance

    placed = load_pretrained(tiny_folder("llama"), device_map=split(tiny_folder("llama")), offload_folder=tmp_path)
    ours = real_head_importance(placed, ["the cat sat on the mat"], max_new_tokens=5)
    theirs = real_head_importance(whole("llama"), ["the cat sat on the mat"], max_new_tokens=5)
    assert ours.baseline == pytest.approx(theirs.baseline, rel=1e-5) and ours.agreement == theirs.agreement
    for key in theirs.drop:
        np.testing.assert_allclose(ours.drop[key], theirs.drop[key], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(ours.gradient[key], theirs.gradient[key], rtol=1e-4, atol=1e-5)
