"""Every bad model folder refused by load_pretrained as a ModelRefusedError with its true reason: a sentence that
names the folder by its own name (never a server path) and what is wrong (the file, the field, the limit). Each
folder is a tiny saved model (devtools.hub_models) broken one way."""

from __future__ import annotations

import json
import re
import shutil
import struct

import pytest
import torch

transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file, save_file  # noqa: E402

from attention_viz.hub import (  # noqa: E402
    ModelRefusedError,
    ModelUnavailableError,
    UnsafeWeightsError,
    UnsupportedModelError,
    load_pretrained,
)
from attention_viz.hub.checks import shown_name  # noqa: E402

TOKENIZER_PREFIXES = ("tokenizer", "vocab", "merges", "source", "target", "special_tokens")


def edit_config(folder, **fields):
    config = json.loads((folder / "config.json").read_text())
    config.update(fields)
    (folder / "config.json").write_text(json.dumps(config))


def edit_weights(folder, change):
    weights = load_file(folder / "model.safetensors")
    change(weights)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


def weights_bytes(folder, change):
    path = folder / "model.safetensors"
    path.write_bytes(change(path.read_bytes()))


def header_garbled(data: bytes) -> bytes:
    """The header's JSON replaced by as many "{" (its length kept)."""
    n = struct.unpack("<Q", data[:8])[0]
    return data[:8] + b"{" * n + data[8 + n:]


def no_tokenizer(folder):
    for path in folder.iterdir():
        if path.name.startswith(TOKENIZER_PREFIXES) or path.suffix == ".spm":
            path.unlink()


def smaller_embeddings(folder):
    """Config and weights of a vocabulary of 100 rows beside the tokenizer of 400 ids."""
    model = transformers.GPT2LMHeadModel.from_pretrained(folder)
    model.resize_token_embeddings(100)
    (folder / "model.safetensors").unlink()
    model.save_pretrained(folder, safe_serialization=True)


def only_the_end_token(folder):
    """A tokenizer.json whose vocabulary is its one special token."""
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["model"].update(vocab={"<|endoftext|>": 0}, merges=[])
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))


def beside_a_pickle(folder):
    torch.save({"x": torch.zeros(1)}, folder / "pytorch_model.bin")
    (folder / "model.safetensors").write_bytes(b"")


def drop_a_tensor(weights):
    weights.pop(next(key for key in sorted(weights) if key.endswith("c_attn.weight")))


def nan_weights(weights):
    weights["transformer.wte.weight"][0, 0] = float("nan")


def a_missing_shard(folder):
    index = {"metadata": {}, "weight_map": {"transformer.wte.weight": "model-00002-of-00002.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))


# (name, family, how it is broken, the kind refused, what the message says after "was refused: ")
BROKEN = [
    ("truncated-weights", "gpt2", lambda f: weights_bytes(f, lambda b: b[: len(b) // 2]), ModelRefusedError,
     r"its weights file model\.safetensors is not a whole safetensors file \(incomplete metadata"),
    ("garbage-weights", "gpt2", lambda f: weights_bytes(f, lambda b: b"not safetensors"), ModelRefusedError,
     r"model\.safetensors is not a whole safetensors file \(header too large\)"),
    ("garbled-header", "gpt2", lambda f: weights_bytes(f, header_garbled), ModelRefusedError,
     r"model\.safetensors is not a whole safetensors file \(invalid JSON in header"),
    ("empty-weights", "gpt2", lambda f: weights_bytes(f, lambda b: b""), ModelRefusedError,
     r"its weights file model\.safetensors is empty\.$"),
    ("empty-beside-a-pickle", "marian", beside_a_pickle, ModelRefusedError,
     r"model\.safetensors is empty \(the pickled pytorch_model\.bin beside it is never opened\)"),
    ("missing-shard", "gpt2", a_missing_shard, ModelRefusedError,
     r"its weights index names model-00002-of-00002\.safetensors, which its folder does not hold"),
    ("wider-config", "gpt2", lambda f: edit_config(f, n_embd=64), ModelRefusedError,
     r"its weights hold transformer\.h\.0\.attn\.c_attn\.bias as \[96\], but its config\.json makes it \[192\] "
     r"\(and \d+ more tensors\)"),
    ("smaller-vocab-config", "bert", lambda f: edit_config(f, vocab_size=100), ModelRefusedError,
     r"its weights hold bert\.embeddings\.word_embeddings\.weight as \[\d+, 32\], but its config\.json makes it "
     r"\[100, 32\]"),
    ("more-kv-heads", "llama", lambda f: edit_config(f, num_key_value_heads=3), ModelRefusedError,
     r"its weights hold model\.layers\.0\.self_attn\.k_proj\.weight as \[16, 32\], but its config\.json makes it "
     r"\[24, 32\]"),
    ("a-tensor-missing", "gpt2", lambda f: edit_weights(f, drop_a_tensor), ModelRefusedError,
     r"its weights lack transformer\.h\.0\.attn\.c_attn\.weight\.$"),
    ("nan-weights", "gpt2", lambda f: edit_weights(f, nan_weights), ModelRefusedError,
     r"values that are not finite \(NaN or infinite\) in transformer\.wte\.weight"),
    ("config-not-json", "gpt2", lambda f: (f / "config.json").write_text("{not json"), ModelRefusedError,
     r"its config\.json is not valid JSON \(line 1, column 2\)"),
    ("config-cut", "marian", lambda f: (f / "config.json").write_text((f / "config.json").read_text()[:200]),
     ModelRefusedError, r"its config\.json is not valid JSON \(line \d+, column \d+\)"),
    ("config-a-list", "gpt2", lambda f: (f / "config.json").write_text("[1, 2]"), ModelRefusedError,
     r"its config\.json names no model_type"),
    ("config-missing", "gpt2", lambda f: (f / "config.json").unlink(), ModelRefusedError,
     r"its folder holds no config\.json"),
    ("heads-do-not-divide", "llama", lambda f: edit_config(f, num_attention_heads=3), ModelRefusedError,
     r"its config\.json does not describe a model that can be built \(.*hidden size \(32\) is not a multiple of "
     r"the number of attention heads \(3\)"),
    ("gpt2-heads-do-not-divide", "gpt2", lambda f: edit_config(f, n_head=5), ModelRefusedError,
     r"could not be built from its config\.json and weights \(ValueError: .*must be divisible by num_heads"),
    ("a-field-of-the-wrong-type", "gpt2", lambda f: edit_config(f, vocab_size="many"), ModelRefusedError,
     r"does not describe a model that can be built \(.*'vocab_size' expected int, got str"),
    ("generation-config-not-json", "gpt2", lambda f: (f / "generation_config.json").write_text("{bad"),
     ModelRefusedError, r"its generation_config\.json is not valid JSON"),
    ("tokenizer-json-not-json", "gpt2", lambda f: (f / "tokenizer.json").write_text("{bad"), ModelRefusedError,
     r"its tokenizer\.json is not valid JSON"),
    *[(f"no-tokenizer-{family}", family, no_tokenizer, ModelRefusedError, r"its folder holds no tokenizer files")
      for family in ("marian", "bart", "mbart", "bert", "gpt2", "llama", "qwen2")],
    ("marian-without-target-spm", "marian", lambda f: (f / "target.spm").unlink(), ModelRefusedError,
     r"its tokenizer \(MarianTokenizer\) reads source\.spm, target\.spm, vocab\.json, and its folder lacks "
     r"target\.spm"),
    ("empty-tokenizer", "gpt2", only_the_end_token, ModelRefusedError,
     r"its tokenizer is empty: it knows nothing but its special tokens \(1\)"),
    ("tokenizer-past-the-embeddings", "gpt2", smaller_embeddings, ModelRefusedError,
     r"its tokenizer has ids up to 399, past its embedding matrix's 100 rows \(vocab_size in config\.json\)"),
    ("pad-disagrees", "bart", lambda f: edit_config(f, pad_token_id=3), ModelRefusedError,
     r"its tokenizer's pad token is id 1, but its config says pad_token_id = 3"),
    ("eos-disagrees", "gpt2", lambda f: (edit_config(f, eos_token_id=5), (f / "generation_config.json").unlink()),
     ModelRefusedError, r"its tokenizer's eos token is id 0, but its config says eos_token_id = 5"),
    ("bos-disagrees", "llama", lambda f: edit_config(f, bos_token_id=2), ModelRefusedError,
     r"its tokenizer's bos token is id 1, but its config says bos_token_id = 2"),
    ("decoder-start-outside", "marian", lambda f: edit_config(f, decoder_start_token_id=500), ModelRefusedError,
     r"its config's decoder_start_token_id = 500 lies outside its 120 embedding rows"),
    ("pickled-only", "gpt2", lambda f: (torch.save({}, f / "pytorch_model.bin"), (f / "model.safetensors").unlink()),
     UnsafeWeightsError, r"its weights are pickled \(pytorch_model\.bin\)"),
    ("longt5-named", "gpt2", lambda f: edit_config(f, model_type="longt5"), UnsupportedModelError,
     r"longt5 models are not supported: LongT5's encoder attends within local blocks"),
]


@pytest.mark.parametrize("name, family, breaks, kind, reason", BROKEN, ids=[case[0] for case in BROKEN])
def test_a_broken_folder_is_refused_with_its_reason_and_its_own_name(tiny_folder, tmp_path, name, family, breaks,
                                                                    kind, reason):
    folder = tmp_path / name
    shutil.copytree(tiny_folder(family), folder)
    breaks(folder)
    with pytest.raises(ModelRefusedError) as refused:
        load_pretrained(folder)
    message = str(refused.value)
    assert type(refused.value) is kind, message
    assert message.startswith(f"The model '{name}' was refused: ") and message.endswith("."), message
    assert str(tmp_path) not in message and "\n" not in message
    assert re.search(reason, message), message


def test_the_refusals_are_one_family_of_errors():
    assert issubclass(UnsafeWeightsError, ModelRefusedError) and issubclass(UnsupportedModelError, ModelRefusedError)
    assert issubclass(ModelUnavailableError, ModelRefusedError) and issubclass(ModelUnavailableError, OSError)
    assert issubclass(ModelRefusedError, ValueError)


def test_a_model_is_named_by_its_folders_own_name_or_its_hub_id(tmp_path):
    folder = tmp_path / "models--Helsinki-NLP--opus-mt-en-de" / "snapshots" / "0123abcd"
    folder.mkdir(parents=True)
    assert shown_name(folder) == "Helsinki-NLP/opus-mt-en-de"  # what fetch returns: the cache's snapshot
    assert shown_name(tmp_path / "models--Helsinki-NLP--opus-mt-en-de") == "models--Helsinki-NLP--opus-mt-en-de"
    assert shown_name("Helsinki-NLP/opus-mt-en-de") == "Helsinki-NLP/opus-mt-en-de"
    assert shown_name(str(tmp_path / "no-such-folder")) == "no-such-folder"
    assert shown_name(tmp_path) == tmp_path.name


def test_a_sound_folder_loads_under_its_own_name(tiny_folder):
    model = load_pretrained(tiny_folder("gpt2"))
    assert model.name == tiny_folder("gpt2").name
