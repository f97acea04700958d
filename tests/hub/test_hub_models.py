"""The small real-format models the hub tests stand on (devtools.hub_models): each folder is what a Hub repository of
its family holds, its config's special ids are its tokenizer's, its vocabulary covers every id the tokenizer gives,
and the same seed builds the same weights."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from devtools.hub_models import FAMILIES, save_opus_mt_en_de_random, save_tiny  # noqa: E402

TEXTS = ["the cat sat on the mat", "Grüße aus Köln, naïve café", "emoji 🙂 and 漢字 and ß", "x" * 40]


def loaded(folder):
    config = transformers.AutoConfig.from_pretrained(folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    generation = json.loads((folder / "generation_config.json").read_text()) \
        if (folder / "generation_config.json").exists() else {}
    return config, tokenizer, generation


@pytest.mark.parametrize("family", FAMILIES)
def test_the_config_and_the_tokenizer_agree(tiny_folder, family):
    folder = tiny_folder(family)
    config, tokenizer, generation = loaded(folder)
    assert {p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt", ".pkl")} == set()
    assert (folder / "model.safetensors").exists() and (folder / "config.json").exists()
    assert config.vocab_size >= len(tokenizer)
    for text in TEXTS:
        ids = tokenizer(text)["input_ids"]
        assert ids and max(ids) < config.vocab_size, text
    vocabulary = tokenizer.get_vocab()
    assert max(vocabulary.values()) < config.vocab_size
    eos, pad, bos = tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.bos_token_id
    if family == "bert":
        assert config.pad_token_id == pad == vocabulary["[PAD]"]
        assert tokenizer.convert_ids_to_tokens(tokenizer("the cat")["input_ids"])[::3] == ["[CLS]", "[SEP]"]
        return
    assert config.eos_token_id == eos and generation["eos_token_id"] == eos
    if family == "marian":  # opus-mt's layout: </s> 0, <unk> 1, <pad> last and the decoder's start, never written
        assert (eos, tokenizer.unk_token_id, pad) == (0, 1, len(tokenizer) - 1)
        assert config.pad_token_id == config.decoder_start_token_id == pad
        assert generation["bad_words_ids"] == [[pad]] and generation["forced_eos_token_id"] == eos
        assert tokenizer("the cat")["input_ids"][-1] == eos
    elif family in ("bart", "mbart"):  # fairseq's four: <s> 0, <pad> 1, </s> 2 (the decoder's start), <unk> 3
        assert (bos, pad, eos, tokenizer.unk_token_id) == (0, 1, 2, 3)
        assert config.pad_token_id == pad and config.bos_token_id == bos and config.decoder_start_token_id == eos
        assert generation["forced_eos_token_id"] == eos
        if family == "bart":  # <s> text </s>; <s> forced first, no repeated trigram
            assert tokenizer("the cat")["input_ids"][0] == bos and tokenizer("the cat")["input_ids"][-1] == eos
            assert generation["forced_bos_token_id"] == bos and generation["no_repeat_ngram_size"] == 3
        else:  # text </s> en_XX; the target language forced first
            assert tokenizer.convert_ids_to_tokens(tokenizer("the cat")["input_ids"])[-2:] == ["</s>", "en_XX"]
            assert generation["forced_bos_token_id"] == tokenizer.convert_tokens_to_ids("de_DE")
            assert tokenizer.convert_ids_to_tokens(len(tokenizer) - 1) == "<mask>"
    elif family == "gpt2":  # <|endoftext|> begins and ends, no <pad>
        assert pad is None and config.pad_token_id is None and bos == eos == config.bos_token_id == 0
    elif family == "llama":  # Llama 2's layout: <unk> 0, <s> 1, </s> 2, the 256 bytes, no <pad>; <s> starts a text
        assert (tokenizer.unk_token_id, bos, eos) == (0, 1, 2) and pad is None and config.pad_token_id is None
        assert [vocabulary[f"<0x{b:02X}>"] for b in (0, 255)] == [3, 258]
        assert tokenizer("the cat")["input_ids"][0] == bos == config.bos_token_id
        assert "<0xF0>" in tokenizer.convert_ids_to_tokens(tokenizer("🙂")["input_ids"])  # unseen: its bytes
        assert (config.num_attention_heads, config.num_key_value_heads) == (4, 2)
    else:  # qwen2: <|endoftext|> ends and pads, no bos; the chat markers special; the vocabulary padded to 64s
        assert bos is None and pad == eos == vocabulary["<|endoftext|>"] == config.bos_token_id
        assert tokenizer("<|im_end|>")["input_ids"] == [vocabulary["<|im_end|>"]]
        assert config.vocab_size % 64 == 0 and config.vocab_size > len(tokenizer)
        assert (config.num_attention_heads, config.num_key_value_heads) == (4, 2) and config.tie_word_embeddings


@pytest.mark.parametrize("family", FAMILIES)
def test_the_same_seed_builds_the_same_model_and_another_seed_another(tiny_folder, tmp_path, family):
    weights = load_file(tiny_folder(family) / "model.safetensors")
    again = load_file(save_tiny(family, tmp_path / "again") / "model.safetensors")
    other = load_file(save_tiny(family, tmp_path / "other", seed=1) / "model.safetensors")
    assert weights.keys() == again.keys() == other.keys()
    assert all(torch.equal(weights[k], again[k]) for k in weights)
    assert any(not torch.equal(weights[k], other[k]) for k in weights)
    files = sorted(p.name for p in tiny_folder(family).iterdir() if p.name != "model.safetensors")
    assert files == sorted(p.name for p in (tmp_path / "again").iterdir() if p.name != "model.safetensors")
    for name in files:  # the tokenizer's files (SentencePiece models included) and the configs, byte for byte
        assert (tmp_path / "again" / name).read_bytes() == (tiny_folder(family) / name).read_bytes(), name


def test_an_unknown_family_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown family 't5'"):
        save_tiny("t5", tmp_path / "t5")


def test_the_opus_mt_en_de_folder_has_its_configuration_and_its_special_ids(tmp_path):
    folder = save_opus_mt_en_de_random(tmp_path / "opus-mt-en-de")
    config, tokenizer, generation = loaded(folder)
    expected = {"model_type": "marian", "d_model": 512, "encoder_layers": 6, "decoder_layers": 6,
                "encoder_attention_heads": 8, "decoder_attention_heads": 8, "encoder_ffn_dim": 2048,
                "decoder_ffn_dim": 2048, "vocab_size": 58101, "pad_token_id": 58100, "decoder_start_token_id": 58100,
                "eos_token_id": 0, "max_position_embeddings": 512, "activation_function": "swish",
                "scale_embedding": True, "share_encoder_decoder_embeddings": True, "normalize_before": False,
                "static_position_embeddings": True}
    assert {key: getattr(config, key) for key in expected} == expected
    assert generation["bad_words_ids"] == [[58100]] and generation["forced_eos_token_id"] == 0
    assert type(tokenizer).__name__ == "MarianTokenizer" and len(tokenizer) == 58101
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id) == (58100, 0, 1)
    ids = tokenizer("Attention is all you need.")["input_ids"]
    assert ids[-1] == 0 and max(ids) < 600 and len(ids) <= 10  # everyday words whole, as the real one has them
    with safe_open(folder / "model.safetensors", "pt") as weights:  # the shapes, without reading the weights
        shapes = {name: weights.get_slice(name).get_shape() for name in weights.keys()}
    assert shapes["model.shared.weight"] == [58101, 512]
    assert 73e6 < sum(torch.Size(s).numel() for s in shapes.values()) < 76e6  # opus-mt-en-de: 74M parameters
