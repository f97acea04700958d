"""Loading real models safely: safetensors only (a pickle is refused unopened), never remote code, offline when the
Hub is off, unsupported families refused with the reason before any weight is read; each family comes back with
its own tokenizer class."""

from __future__ import annotations

import builtins
import io
import json
import pickle
import shutil

import pytest
import torch

transformers = pytest.importorskip("transformers")

from attention_viz.hub import (  # noqa: E402
    ModelRefusedError,
    ModelUnavailableError,
    UnsafeWeightsError,
    UnsupportedModelError,
    load_pretrained,
)

TOKENIZERS = {"marian": "MarianTokenizer", "bart": "RobertaTokenizer",  # BART's class in transformers 5 (its alias)
              "mbart": "MBartTokenizer", "bert": "BertTokenizer", "gpt2": "GPT2Tokenizer",
              "llama": "LlamaTokenizer", "qwen2": "Qwen2Tokenizer"}
FAMILY_NAMES = {"marian": "Marian", "bart": "BART", "mbart": "mBART", "bert": "BERT", "gpt2": "GPT-2",
                "llama": "Llama-class", "qwen2": "Llama-class"}


@pytest.mark.parametrize("family, tokenizer", list(TOKENIZERS.items()))
def test_a_saved_folder_loads_with_its_familys_own_tokenizer(tiny_folder, family, tokenizer):
    model = load_pretrained(tiny_folder(family))
    assert type(model.tokenizer).__name__ == tokenizer
    assert model.family.name == FAMILY_NAMES[family]
    assert model.model.config._attn_implementation == "attention_viz"
    assert not model.model.training
    encoding = model.encode("the cat sat on the mat")
    assert encoding.ids.dtype == torch.long and len(encoding.tokens) == len(encoding.ids) > 2
    assert encoding.tokens == model.tokenizer.convert_ids_to_tokens(encoding.ids.tolist())
    if family in ("marian", "mbart", "llama"):  # SentencePiece-style pieces: ▁ marks a word's start
        assert any(piece.startswith("▁") for piece in encoding.tokens)
    if family == "marian":  # SentencePiece's files, as opus-mt ships them
        assert {"source.spm", "target.spm", "vocab.json"} <= {p.name for p in tiny_folder(family).iterdir()}


class Opened:
    """Fails the test when anything opens, loads or unpickles a pickled weights file."""

    def __init__(self, monkeypatch):
        self.seen = []
        real_open, real_io_open = builtins.open, io.open

        def guard(real):
            def opener(file, *args, **kwargs):
                if str(file).endswith((".bin", ".pt", ".pth", ".ckpt", ".pkl")):
                    self.seen.append(str(file))
                    raise AssertionError(f"{file} was opened")
                return real(file, *args, **kwargs)
            return opener

        def refuse(name):
            def call(*args, **kwargs):
                self.seen.append(name)
                raise AssertionError(f"{name} was called")
            return call

        monkeypatch.setattr(builtins, "open", guard(real_open))
        monkeypatch.setattr(io, "open", guard(real_io_open))
        for module, name in ((torch, "load"), (pickle, "load"), (pickle, "loads"), (pickle, "Unpickler")):
            monkeypatch.setattr(module, name, refuse(f"{module.__name__}.{name}"))


def pickled_copy(folder, tmp_path, keep_safetensors=False):
    """A copy of the folder whose weights are also (or only) a pickle, `pytorch_model.bin`."""
    copy = tmp_path / "pickled"
    shutil.copytree(folder, copy)
    state = load_pretrained(folder).model.state_dict()
    torch.save(state, copy / "pytorch_model.bin")
    if not keep_safetensors:
        (copy / "model.safetensors").unlink()
    return copy


@pytest.mark.parametrize("family", ["gpt2", "marian"])
def test_pickled_weights_are_refused_without_being_opened(tiny_folder, tmp_path, monkeypatch, family):
    folder = pickled_copy(tiny_folder(family), tmp_path)
    opened = Opened(monkeypatch)
    with pytest.raises(UnsafeWeightsError, match="pickled .*pytorch_model.bin.*safetensors"):
        load_pretrained(folder)
    assert not opened.seen


def test_beside_safetensors_a_pickle_is_never_opened(tiny_folder, tmp_path, monkeypatch):
    folder = pickled_copy(tiny_folder("gpt2"), tmp_path, keep_safetensors=True)
    expected = load_pretrained(tiny_folder("gpt2"))
    opened = Opened(monkeypatch)
    model = load_pretrained(folder)
    assert not opened.seen
    ids = model.encode("the cat").ids[None]
    assert torch.equal(model.forward(ids)[0], expected.forward(ids)[0])


def test_a_folder_without_weights_is_refused(tiny_folder, tmp_path):
    folder = tmp_path / "empty"
    shutil.copytree(tiny_folder("gpt2"), folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(ModelRefusedError, match="'empty' was refused: its folder holds no weights"):
        load_pretrained(folder)


def remote_code_folder(source, tmp_path, model_type):
    """A copy of a GPT-2 folder whose config points at a modeling file of its own that leaves a mark when run."""
    folder = tmp_path / f"remote-{model_type}"
    shutil.copytree(source, folder)
    marker = tmp_path / f"ran-{model_type}"
    (folder / "modeling_evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('remote code ran')\n"
        "from transformers import GPT2Config as EvilConfig, GPT2LMHeadModel as EvilModel\n")
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type=model_type, auto_map={"AutoConfig": "modeling_evil.EvilConfig",
                                                   "AutoModelForCausalLM": "modeling_evil.EvilModel"})
    (folder / "config.json").write_text(json.dumps(config))
    return folder, marker


def test_remote_code_of_an_unknown_model_type_is_refused_without_running(tiny_folder, tmp_path):
    folder, marker = remote_code_folder(tiny_folder("gpt2"), tmp_path, "evil")
    with pytest.raises(UnsupportedModelError, match="'evil' models are not supported.*own code .* never run"):
        load_pretrained(folder)
    assert not marker.exists()


def test_remote_code_beside_a_known_model_type_is_ignored(tiny_folder, tmp_path):
    folder, marker = remote_code_folder(tiny_folder("gpt2"), tmp_path, "gpt2")
    model = load_pretrained(folder)
    assert type(model.model) is transformers.GPT2LMHeadModel  # transformers' own class, not the folder's
    assert not marker.exists()


def unreadable_weights(folder):
    """Weights that no reader could load: a refusal that comes back instead of a read error came first."""
    (folder / "model.safetensors").write_bytes(b"not safetensors")


def test_a_transient_global_longt5_is_refused_with_the_reason_before_any_weight_is_read(tmp_path):
    folder = tmp_path / "longt5"
    config = transformers.LongT5Config(vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=4,
                                       encoder_attention_type="transient-global")
    transformers.LongT5ForConditionalGeneration(config).save_pretrained(folder, safe_serialization=True)
    with pytest.raises(UnsupportedModelError, match="transient-global attention is not supported.*global token"):
        load_pretrained(folder)
    unreadable_weights(folder)
    with pytest.raises(UnsupportedModelError, match="transient global token per block"):
        load_pretrained(folder)


def test_a_model_type_transformers_does_not_know_is_refused_before_any_weight_is_read(tiny_folder, tmp_path):
    folder = tmp_path / "unknown"
    shutil.copytree(tiny_folder("gpt2"), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "no-such-type"}))
    unreadable_weights(folder)
    with pytest.raises(UnsupportedModelError, match="'no-such-type' models are not supported: transformers does not "
                                                    "know this model type"):
        load_pretrained(folder)


def test_a_model_not_cached_is_refused_offline_with_a_message(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache" / "hub"))
    for call in (lambda: load_pretrained("Helsinki-NLP/opus-mt-xx-yy"),
                 lambda: load_pretrained("Helsinki-NLP/opus-mt-xx-yy", local_files_only=True)):
        with pytest.raises(ModelUnavailableError, match="'Helsinki-NLP/opus-mt-xx-yy' is not in this machine's "
                                                         "Hugging Face cache and the Hub is switched off here"):
            call()



def test_a_models_stacks_are_read_from_its_config_without_loading_it(tiny_folder, tmp_path, monkeypatch):
    """hub.loading.stacks: 2 for an encoder-decoder, 1 for an encoder or a decoder alone, None where no config can
    be read offline (not cached); one_stack says the same, the unknown counted as one stack (loading it says why)."""
    from attention_viz.hub.loading import one_stack, stacks

    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache" / "hub"))
    for name, count in ((tiny_folder("marian"), 2), (tiny_folder("bart"), 2), (tiny_folder("bert"), 1),
                        (tiny_folder("gpt2"), 1), ("Helsinki-NLP/opus-mt-xx-yy", None), (str(tmp_path), None)):
        assert stacks(str(name)) == count and one_stack(str(name)) == (count != 2), name


def test_the_long_tabs_first_model_reads_the_page_as_far_as_the_server_can_tell():
    """The Long text tab offers first the models whose configs say one stack (each reads the whole page), then the
    encoder-decoders, then those the server cannot tell before loading (one that cannot be had is refused), each
    group in the order the server was set up with: its default is never a model that cannot be had while one can."""
    from types import SimpleNamespace

    from attention_viz.webui.long_tab import choices_of

    stacks = {"hub:missing": None, "hub:marian": 2, "hub:gpt2": 1, "hub:other": None, "hub:bert": 1}
    catalog = SimpleNamespace(real_choices=[(key[4:], key) for key in stacks], real=SimpleNamespace(stacks=stacks.get))
    assert [key for _, key in choices_of(SimpleNamespace(runs=SimpleNamespace(catalog=catalog)))] == [
        "hub:gpt2", "hub:bert", "hub:marian", "hub:missing", "hub:other"]


# ----------------------------------------------------------------------------- what a model can do

ABILITIES = {"marian": (True, False, True), "bart": (True, False, True), "mbart": (True, False, True),
             "bert": (False, True, False), "gpt2": (True, False, True), "llama": (True, False, True),
             "qwen2": (True, False, True)}  # (writes_text, fills_masks, causal)


@pytest.mark.parametrize("family", list(ABILITIES))
def test_each_family_says_what_it_can_do(tiny_folder, family):
    abilities = load_pretrained(tiny_folder(family)).abilities
    assert (abilities.writes_text, abilities.fills_masks, abilities.causal) == ABILITIES[family]


def headless(source, tmp_path, base_class):
    """The folder's base model alone (no output head) with its tokenizer files, as sentence-embedding checkpoints
    are saved (`architectures: ["BertModel"]`)."""
    folder = tmp_path / f"headless-{base_class.__name__}"
    shutil.copytree(source, folder)
    (folder / "model.safetensors").unlink()
    base_class.from_pretrained(source).save_pretrained(folder, safe_serialization=True)
    return folder


@pytest.mark.parametrize("family, base_class", [("bert", "BertModel"), ("gpt2", "GPT2Model"),
                                                ("llama", "LlamaModel"), ("marian", "MarianModel")])
def test_a_checkpoint_without_its_output_head_loads_and_records_the_same_maps(tiny_folder, tmp_path, family,
                                                                             base_class):
    from attention_viz.hub.text_run import run_text
    from attention_viz.importance import real_head_importance, real_head_means

    folder = headless(tiny_folder(family), tmp_path, getattr(transformers, base_class))
    model, whole = load_pretrained(folder), load_pretrained(tiny_folder(family))
    assert type(model.model).__name__ == base_class
    abilities = model.abilities
    assert (abilities.writes_text, abilities.fills_masks, abilities.causal) == (False, False, family != "bert")
    ids = model.encode("the cat sat on the mat").ids[None]  # (1, S)
    decoder = torch.tensor([[model.start_id, 5, 7]]) if family == "marian" else None
    with torch.no_grad():
        states, maps = model.forward(ids, decoder)
        _, expected = whole.forward(ids, decoder)
    assert states.shape == (*(decoder if decoder is not None else ids).shape, model.d_model)  # hidden states
    assert list(maps) == list(expected)
    for key in maps:
        torch.testing.assert_close(maps[key], expected[key], atol=1e-6, rtol=0, msg=key)
    with pytest.raises(ValueError, match="encoder only" if family == "bert" else "without its output head"):
        model.greedy_decode(ids, 3)
    run = run_text(model, "the cat sat on the mat", max_new_tokens=3)
    assert run.output == "" and run.written == () and "no output head" in " ".join(run.notes)
    assert set(run.maps) == set(maps)
    from attention_viz.explorer.notebook import run_pretrained  # the notebook's view of it: every map, no decode to step
    payload = run_pretrained(model, "the cat sat on the mat", max_new_tokens=3)
    assert payload.get("decode") is None and {k["kind"] for k in payload["kinds"]} == {key.split(".")[0] + "."
                                                                                         + key.split(".")[2]
                                                                                         for key in maps}
    with pytest.raises(ValueError, match="encoder only" if family == "bert" else "without its output head"):
        real_head_importance(model, ["the cat"], max_new_tokens=2)
    if family != "marian":  # mean ablation's reference: one pass over the texts, as for an encoder
        means = real_head_means(model, ["the cat", "attention is all you need"])
        assert set(means) == set(maps) and all(m.shape[0] == model.n_heads for m in means.values())
