"""Loading real models safely: safetensors only (a pickle is refused unopened), never remote code, offline when the
Hub is off, unsupported families refused with the reason; the tokenizers are the families' own classes."""

from __future__ import annotations

import json
import pickle
import shutil

import pytest
import torch

transformers = pytest.importorskip("transformers")

from attention_viz.hub import (  # noqa: E402
    ModelUnavailableError,
    UnsafeWeightsError,
    UnsupportedModelError,
    load_pretrained,
)

TOKENIZERS = {"marian": "MarianTokenizer", "bart": "RobertaTokenizer", "bert": "BertTokenizer",
              "gpt2": "GPT2Tokenizer", "qwen2": "Qwen2Tokenizer"}


@pytest.mark.parametrize("family, tokenizer", list(TOKENIZERS.items()))
def test_a_saved_folder_loads_with_its_familys_own_tokenizer(tiny_folders, family, tokenizer):
    model = load_pretrained(tiny_folders[family])
    assert type(model.tokenizer).__name__ == tokenizer
    assert model.model.config._attn_implementation == "attention_viz"
    if family == "marian":  # SentencePiece's files, as opus-mt ships them
        assert {"source.spm", "target.spm", "vocab.json"} <= {p.name for p in tiny_folders[family].iterdir()}
        assert any(piece.startswith("▁") for piece in model.encode("the cat sat").tokens)


def test_pickled_weights_are_refused_without_being_opened(tiny_folders, tmp_path, monkeypatch):
    folder = tmp_path / "pickled"
    shutil.copytree(tiny_folders["gpt2"], folder)
    model = load_pretrained(folder)
    torch.save(model.model.state_dict(), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    opened = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: opened.append(a) or pytest.fail("torch.load was called"))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: opened.append(a) or pytest.fail("pickle.load was called"))
    with pytest.raises(UnsafeWeightsError, match="pickled"):
        load_pretrained(folder)
    assert not opened


def test_a_folder_without_weights_is_refused(tiny_folders, tmp_path):
    folder = tmp_path / "empty"
    shutil.copytree(tiny_folders["gpt2"], folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="holds no weights"):
        load_pretrained(folder)


def test_remote_code_never_runs(tiny_folders, tmp_path):
    folder = tmp_path / "remote"
    shutil.copytree(tiny_folders["gpt2"], folder)
    marker = tmp_path / "ran"
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="evil", auto_map={"AutoConfig": "modeling_evil.EvilConfig",
                                               "AutoModelForCausalLM": "modeling_evil.EvilModel"})
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises((ValueError, OSError)):
        load_pretrained(folder)
    assert not marker.exists()


def test_t5_is_refused_with_the_reason(tmp_path):
    folder = tmp_path / "t5"
    config = transformers.T5Config(vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=4)
    transformers.T5ForConditionalGeneration(config).save_pretrained(folder, safe_serialization=True)
    with pytest.raises(UnsupportedModelError, match="relative-position bias"):
        load_pretrained(folder)


def test_an_unproven_family_is_refused_naming_the_supported_ones(tmp_path):
    folder = tmp_path / "opt"
    config = transformers.OPTConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, ffn_dim=32,
                                    num_attention_heads=4, word_embed_proj_dim=16)
    transformers.OPTForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    with pytest.raises(UnsupportedModelError, match="'opt' models are not supported.*marian.*gpt2.*llama"):
        load_pretrained(folder)


def test_a_model_not_cached_is_refused_offline_with_a_message(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-cache"))
    with pytest.raises(ModelUnavailableError, match="not in this machine's Hugging Face cache and the Hub is "
                                                     "switched off here"):
        load_pretrained("Helsinki-NLP/opus-mt-xx-yy")
