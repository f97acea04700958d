"""Small real-format models for tests and benchmarks, saved offline: random weights, fixed seeds, real tokenizers.

Each builder writes what `attention_viz.hub.load_pretrained(folder)` reads from the Hub: a config, safetensors
weights, a generation config and the family's own tokenizer class in its own file layout (Marian's SentencePiece
files; a byte-level BPE for GPT-2, BART and the Llama class; WordPiece for BERT), trained here in a second on a
small English and German corpus. Nothing is downloaded.

    save_tiny("marian", folder)              # 2 + 2 layers, 4 heads, d_model 32
    save_opus_mt_en_de_random(folder)        # Helsinki-NLP/opus-mt-en-de's configuration (74M parameters)
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

FAMILIES = ("marian", "bart", "mbart", "bert", "gpt2", "llama", "qwen2")
CORPUS = [
    "the cat sat on the mat", "attention is all you need", "the model reads every word of the sentence",
    "die katze sitzt auf der matte", "aufmerksamkeit ist alles, was man braucht", "guten morgen, wie geht es dir?",
    "hello world, how are you today?", "queries and keys meet in a dot product", "the decoder writes one token at a time",
    "ein haus, ein baum und ein grünes feld", "naïve café, Grüße aus Köln", "numbers like 2026 and 512 appear too",
    "Translation from English to German", "Heads in every layer look at different words",
    "Attention Is All You Need, by Vaswani and others", "BERT, GPT and Llama read text as pieces",
]


# Everyday English words: the opus-mt-sized tokenizer learns most of them whole, as a real one would.
WORDS = ("the be to of and a in that have it for not on with he as you do at this but his by from they we say her "
         "she or an will my one all would there their what so up out if about who get which go me when make can "
         "like time no just him know take people into year your good some could them see other than then now look "
         "only come its over think also back after use two how our work first well way even new want because any "
         "these give day most us is are was were has had been being model attention need translation house green "
         "students learn quickly today every head layer sentence word words text read write reads writes language "
         "english german query key value weight softmax scale matrix teacher class lecture hall morning evening "
         "city country world school book paper table window door water coffee music friend family child children").split()


def _corpus_file(folder: Path, sentences: int = 0) -> Path:
    """The corpus: CORPUS, and `sentences` more made of WORDS (seeded)."""
    import random

    rng = random.Random(0)
    made = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))).capitalize() + "."
            for _ in range(sentences)]
    path = folder / "corpus.txt"
    path.write_text("\n".join(CORPUS * 8 + made), encoding="utf-8")
    return path


def _byte_level_bpe(folder: Path, specials: list[str], vocab_size: int = 400):
    """A byte-level BPE trained on the corpus (the tokenizers library), as a tokenizers.Tokenizer."""
    from tokenizers import ByteLevelBPETokenizer

    with tempfile.TemporaryDirectory() as tmp:
        bpe = ByteLevelBPETokenizer()
        bpe.train([str(_corpus_file(Path(tmp)))], vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    return bpe._tokenizer


def _marian_tokenizer(folder: Path, vocab_size: int | None = None, pieces: int = 120):
    """Marian's tokenizer files: source.spm and target.spm (one SentencePiece model here) and vocab.json; with
    vocab_size, the vocabulary is filled with unused pieces up to it so that <pad> is its last id, as in opus-mt."""
    import sentencepiece as spm
    from transformers import MarianTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        corpus = _corpus_file(Path(tmp), sentences=0 if pieces <= 120 else 4000)
        spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(Path(tmp) / "spm"),
                                       vocab_size=pieces, character_coverage=1.0, model_type="unigram",
                                       hard_vocab_limit=False, minloglevel=2)
        model = (Path(tmp) / "spm.model").read_bytes()
    (folder / "source.spm").write_bytes(model)
    (folder / "target.spm").write_bytes(model)
    pieces = spm.SentencePieceProcessor(model_proto=model)
    ordered = ["</s>", "<unk>"] + [pieces.id_to_piece(i) for i in range(pieces.get_piece_size())
                                   if pieces.id_to_piece(i) not in ("</s>", "<unk>", "<s>")]
    if vocab_size is not None:
        ordered += [f"<unused{i}>" for i in range(vocab_size - 1 - len(ordered))]
    ordered.append("<pad>")
    (folder / "vocab.json").write_text(json.dumps({piece: i for i, piece in enumerate(ordered)}), encoding="utf-8")
    tokenizer = MarianTokenizer(vocab=str(folder / "vocab.json"), source_spm=str(folder / "source.spm"),
                                target_spm=str(folder / "target.spm"))
    tokenizer.save_pretrained(folder)
    return tokenizer


def save_tiny(family: str, folder: Path, *, seed: int = 0, d_model: int = 32, n_heads: int = 4, layers: int = 2
              ) -> Path:
    """A small model of `family` (FAMILIES) with random weights and a real tokenizer, saved to `folder`."""
    import transformers as tf

    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of {FAMILIES}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    ffn = 2 * d_model
    if family == "marian":
        tokenizer = _marian_tokenizer(folder)
        pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
        config = tf.MarianConfig(vocab_size=len(tokenizer), d_model=d_model, encoder_layers=layers,
                                 decoder_layers=layers, encoder_attention_heads=n_heads,
                                 decoder_attention_heads=n_heads, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn,
                                 pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad,
                                 max_position_embeddings=256, activation_function="swish", scale_embedding=True)
        model = tf.MarianMTModel(config)
        model.generation_config.bad_words_ids = [[pad]]  # as opus-mt's: <pad> is never written
        model.generation_config.forced_eos_token_id = eos
    elif family in ("bart", "mbart"):
        # BART's own tokenizer class (RoBERTa's byte-level BPE: <s> text </s>); mBART's real one is SentencePiece
        tokenizer = tf.BartTokenizer(tokenizer_object=_byte_level_bpe(folder, ["<s>", "<pad>", "</s>", "<unk>",
                                                                               "<mask>"]),
                                     bos_token="<s>", pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                     mask_token="<mask>")
        cls, model_cls = ((tf.BartConfig, tf.BartForConditionalGeneration) if family == "bart"
                          else (tf.MBartConfig, tf.MBartForConditionalGeneration))
        config = cls(vocab_size=len(tokenizer), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                     encoder_attention_heads=n_heads, decoder_attention_heads=n_heads, encoder_ffn_dim=ffn,
                     decoder_ffn_dim=ffn, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                     eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.eos_token_id,
                     forced_eos_token_id=tokenizer.eos_token_id, max_position_embeddings=256)
        model = model_cls(config)
    elif family == "bert":
        from tokenizers import BertWordPieceTokenizer

        with tempfile.TemporaryDirectory() as tmp:
            wordpiece = BertWordPieceTokenizer(lowercase=True)
            wordpiece.train([str(_corpus_file(Path(tmp)))], vocab_size=300, show_progress=False)
        tokenizer = tf.BertTokenizer(tokenizer_object=wordpiece._tokenizer)
        config = tf.BertConfig(vocab_size=len(tokenizer), hidden_size=d_model, num_hidden_layers=layers,
                               num_attention_heads=n_heads, intermediate_size=ffn,
                               pad_token_id=tokenizer.pad_token_id, max_position_embeddings=256,
                               architectures=["BertForMaskedLM"])
        model = tf.BertForMaskedLM(config)
    elif family == "gpt2":
        tokenizer = tf.GPT2Tokenizer(tokenizer_object=_byte_level_bpe(folder, ["<|endoftext|>"]))
        config = tf.GPT2Config(vocab_size=len(tokenizer), n_embd=d_model, n_layer=layers, n_head=n_heads,
                               n_positions=256, bos_token_id=tokenizer.eos_token_id,
                               eos_token_id=tokenizer.eos_token_id)
        model = tf.GPT2LMHeadModel(config)
    else:  # the Llama class: rotary positions, grouped-query attention (2 key/value heads for 4 query heads)
        tokenizer_cls, cls, model_cls = ((tf.LlamaTokenizer, tf.LlamaConfig, tf.LlamaForCausalLM) if family == "llama"
                                         else (tf.Qwen2Tokenizer, tf.Qwen2Config, tf.Qwen2ForCausalLM))
        tokenizer = tokenizer_cls(tokenizer_object=_byte_level_bpe(folder, ["<s>", "</s>", "<unk>"]),
                                  bos_token="<s>", eos_token="</s>", unk_token="<unk>")
        config = cls(vocab_size=len(tokenizer), hidden_size=d_model, num_hidden_layers=layers,
                     num_attention_heads=n_heads, num_key_value_heads=max(1, n_heads // 2), intermediate_size=ffn,
                     bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                     max_position_embeddings=256, tie_word_embeddings=False)
        model = model_cls(config)
    model.eval().save_pretrained(folder, safe_serialization=True)
    if family != "marian":
        tokenizer.save_pretrained(folder)
    return folder


def save_opus_mt_en_de_random(folder: Path, *, seed: int = 0) -> Path:
    """Helsinki-NLP/opus-mt-en-de's configuration (d_model 512, 6 + 6 layers, 8 heads, d_ff 2048, vocabulary
    58,101, pad = decoder start = 58,100, </s> = 0) with random weights and a Marian tokenizer of ~600 pieces
    that knows everyday English words whole (a short sentence is about as many pieces as the real one makes);
    unused pieces fill the rest, and its <pad> is 58,100, where the real model has it."""
    import transformers as tf

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _marian_tokenizer(folder, vocab_size=58101, pieces=600)
    assert tokenizer.pad_token_id == 58100 and tokenizer.eos_token_id == 0, (tokenizer.pad_token_id, tokenizer.eos_token_id)
    torch.manual_seed(seed)
    config = tf.MarianConfig(vocab_size=58101, d_model=512, encoder_layers=6, decoder_layers=6,
                             encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                             decoder_ffn_dim=2048, pad_token_id=58100, eos_token_id=0, decoder_start_token_id=58100,
                             max_position_embeddings=512, activation_function="swish", scale_embedding=True,
                             share_encoder_decoder_embeddings=True, static_position_embeddings=True)
    model = tf.MarianMTModel(config)
    model.generation_config.bad_words_ids = [[58100]]
    model.generation_config.forced_eos_token_id = 0
    model.eval().save_pretrained(folder, safe_serialization=True)
    return folder
