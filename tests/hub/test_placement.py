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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_precision_under_a_placement_passes_the_proof(tiny_folder, tmp_path, dtype):
    """bfloat16 and float16 with layers on disk: the proof on load passes, forward runs in the dtype as the model
    loaded whole in it does, and so does the long pass (its logits, a region, every summary), bit for bit."""
    folder = tiny_folder("llama")
    placed = load_pretrained(folder, device_map=split(folder), offload_folder=tmp_path, dtype=dtype)
    in_memory = load_pretrained(folder, device="cpu", dtype=dtype)
    assert placed.fidelity == in_memory.fidelity and placed.fidelity.dtype == str(dtype).removeprefix("torch.")
    assert_same_pass(placed, in_memory, "llama")
    ids = torch.randint(5, 60, (1, 50), generator=torch.Generator().manual_seed(6))  # (1, 50)
    ours, theirs = placed.long_run(ids, rows=16), in_memory.long_run(ids, rows=16)
    assert ours.logits.dtype == dtype and torch.equal(ours.logits, theirs.logits)
    for key in placed.map_keys:
        assert all((ours.summaries[key][name] == theirs.summaries[key][name]).all() for name in theirs.summaries[key])
        assert (ours.region(key, 1, slice(20, 50), slice(0, 50)) == theirs.region(key, 1, slice(20, 50),
                                                                                    slice(0, 50))).all()


def test_an_offloaded_weight_that_is_not_finite_is_refused(tiny_folder, tmp_path):
    """The check of the weights' values reads the offloaded ones from disk (no weight left unread)."""
    from attention_viz.hub.checks import check_model

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


def test_a_device_beside_a_device_map_is_refused(tiny_folder, no_weights_read):
    """device and device_map both say where the model goes: one of them, named."""
    with pytest.raises(ModelRefusedError, match=r"given both device='cpu' and a device_map; give one of them .*"
                                                r"device_map=\{'': 'cpu'\} puts the whole model on one device"):
        load_pretrained(tiny_folder("llama"), device="cpu", device_map="auto")


@pytest.fixture
def small_machine(monkeypatch):
    """room() as a machine with 1 kB of memory and 2 kB of free disk: what the checks read, nothing else."""
    from attention_viz.hub import placement

    def room(offload_folder=None):
        return {"cpu": 1000} | ({"disk": 2000} if offload_folder is not None else {})

    monkeypatch.setattr(placement, "room", room)
    return placement


def test_weights_that_do_not_fit_are_refused_before_any_weight_is_read(tiny_folder, tmp_path, small_machine,
                                                                      no_weights_read):
    """The whole model on the CPU, by a device or by a map, on a machine with 1 kB free: refused with its bytes and
    what to change; a map that puts it on disk instead is not (its layers are read from its own safetensors files)."""
    folder = tiny_folder("llama")
    total = small_machine.header_bytes(sorted(folder.glob("*.safetensors")), torch.float32)
    shown = small_machine.shown_bytes(total)
    with pytest.raises(ModelRefusedError, match=rf"its weights are {shown} in float32, and cpu has 1\.0 kB free; "
                                                r"load it with device_map='auto' and an offload_folder"):
        load_pretrained(folder, device="cpu")
    with pytest.raises(ModelRefusedError, match=r"its device map puts .* of its .* of weights \(bfloat16\) on cpu, "
                                                r"and cpu has 1\.0 kB free; map some of its layers to 'disk'"):
        load_pretrained(folder, device_map={"": "cpu"}, dtype=torch.bfloat16)


def test_a_model_on_disk_needs_no_room_in_the_offload_folder_unless_it_is_converted(tiny_folder, tmp_path,
                                                                                    small_machine):
    """Layers on disk are read from the model's own files: a full map to disk loads on a machine with 1 kB free.
    Weights transformers converts while loading are written to the folder: then the folder's free disk counts, for a
    map and for a strategy (what spills over the memory)."""
    config = transformers.AutoConfig.from_pretrained(tiny_folder("llama"))
    empty = small_machine.empty_model(model_class(config), config)
    assert not small_machine.written_to_disk(empty)  # a Llama's weights load as they are stored
    sizes = small_machine.weight_bytes(empty, torch.float32)
    small_machine.check_room({"": "disk"}, sizes, {"cpu": 1000, "disk": 2000}, False, torch.float32)
    with pytest.raises(ValueError, match=r"puts .* on disk, and its offload folder's disk has 2\.0 kB free; name an "
                                         "offload_folder on a disk with room"):
        small_machine.check_room({"": "disk"}, sizes, {"cpu": 1000, "disk": 2000}, True, torch.float32)
    with pytest.raises(ValueError, match=r"this machine's memory holds 1\.0 kB, and the .* left over are converted "
                                         r"while loading and written to disk, but no offload_folder was given"):
        small_machine.check_room("auto", sizes, {"cpu": 1000}, True, torch.float32)
    small_machine.check_room("auto", sizes, {"cpu": 1000}, False, torch.float32)  # spilled to disk, read in place
    placed = load_pretrained(tiny_folder("llama"), device_map={"": "disk"}, offload_folder=tmp_path / "offload")
    assert all(p.device.type == "meta" for p in placed.model.parameters())


def test_the_bytes_checked_are_the_weights_loaded(tiny_folder):
    """The safetensors headers and the model built on the meta device give the bytes of the weights loaded, in the
    dtype asked for; a mixture of experts (merged experts) is one whose offloaded weights are written to disk."""
    from attention_viz.hub import placement

    folder = tiny_folder("llama")
    for dtype in (torch.float32, torch.bfloat16):
        model = load_pretrained(folder, device="cpu", dtype=dtype).model
        loaded = sum(p.numel() * p.element_size() for p in model.parameters())
        assert placement.header_bytes(sorted(folder.glob("*.safetensors")), dtype) == loaded
        empty = placement.empty_model(model_class(model.config), model.config)
        parameters = {name for name, _ in empty.named_parameters()}
        assert sum(n for name, n in placement.weight_bytes(empty, dtype).items() if name in parameters) == loaded
    mixtral = transformers.MixtralConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, num_local_experts=2)
    assert placement.written_to_disk(placement.empty_model(transformers.AutoModelForCausalLM, mixtral))


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


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")


def on_gpu_cpu_and_disk(folder) -> dict:
    """split()'s map with the embeddings and layer 0 on the first GPU: a GPU, the CPU and disk in one model."""
    device_map = split(folder)
    device_map.update({key: 0 for key in device_map if key.endswith((".layers.0", "embed_tokens"))})
    return device_map


@cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_model_over_a_gpu_the_cpu_and_disk_is_its_eager_self_under_the_same_placement(tiny_folder, tmp_path, dtype):
    """Layer 0 and the embeddings on cuda:0, the other layers on the CPU and disk: the proof passes, forward's maps
    are transformers' eager maps under the same placement and dtype (the proof's tolerance), and the long pass's
    regions are forward's maps."""
    from attention_viz.hub.proof import TOLERANCE

    folder = tiny_folder("llama")
    placed = load_pretrained(folder, device_map=on_gpu_cpu_and_disk(folder), offload_folder=tmp_path, dtype=dtype)
    assert placed.fidelity.proven and placed.device == torch.device("cuda", 0)
    ids = torch.randint(5, 60, (1, 40), generator=torch.Generator().manual_seed(8))  # (1, 40)
    logits, maps = placed.forward(ids)
    placed.model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            eager = placed.model(input_ids=ids.to(placed.device), output_attentions=True, use_cache=False)
    finally:
        placed.model.set_attn_implementation("attention_viz")
    for layer, theirs in enumerate(eager.attentions):
        assert float((maps[f"decoder.{layer}.self_attn"].float() - theirs.float()).abs().max()) <= TOLERANCE[dtype]
    run = placed.long_run(ids, rows=16)
    for key in placed.map_keys:
        region = torch.from_numpy(run.region(key, 2, slice(0, 40), slice(0, 40)))
        assert float((region - maps[key][0, 2].float().cpu()).abs().max()) <= TOLERANCE[dtype]


@cuda
@pytest.mark.cuda
def test_a_gpu_past_those_present_and_a_gpu_too_small_are_refused(tiny_folder, monkeypatch, no_weights_read):
    """The GPU after the last one present, and a map putting the whole model on a GPU with 1 kB free."""
    from attention_viz.hub import placement

    count = torch.cuda.device_count()
    with pytest.raises(ModelRefusedError, match=rf"placed on {count}, but this machine has {count} CUDA GPU"):
        load_pretrained(tiny_folder("llama"), device_map={"": count})
    monkeypatch.setattr(placement, "room", lambda offload_folder=None: {0: 1000, "cpu": 10**12})
    with pytest.raises(ModelRefusedError, match=r"on cuda:0, and cuda:0 has 1\.0 kB free; map some of its layers"):
        load_pretrained(tiny_folder("llama"), device_map={"": 0})
    with pytest.raises(ModelRefusedError, match=r"and cuda:0 has 1\.0 kB free; load it with device_map='auto'"):
        load_pretrained(tiny_folder("llama"), device="cuda:0")


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_a_containers_memory_limit_bounds_what_the_cpu_holds(tmp_path, monkeypatch, version):
    """A container (a Space, a pod) limited to 16 GB on a bigger host: the CPU's room is what its cgroup leaves (the
    limit less its use, the page cache it can drop given back), not the host's available memory; no limit: None."""
    from attention_viz.hub import placement

    memory = tmp_path if version == "v2" else tmp_path / "memory"
    memory.mkdir(exist_ok=True)
    names = (("memory.max", "memory.current", "inactive_file") if version == "v2" else
             ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"))
    (memory / names[0]).write_text(f"{16 * 2**30}\n")
    (memory / names[1]).write_text(f"{6 * 2**30}\n")
    (memory / "memory.stat").write_text(f"anon 1\n{names[2]} {2**30}\nfile 7\n")
    assert placement.container_free(tmp_path) == 11 * 2**30
    with monkeypatch.context() as patched:
        patched.setattr(placement, "container_free", lambda: 11 * 2**30)
        assert placement.room()["cpu"] <= 11 * 2**30
    (memory / names[0]).write_text("max\n" if version == "v2" else f"{2**63 - 4096}\n")
    assert placement.container_free(tmp_path) is None
    assert placement.container_free(tmp_path / "absent") is None
