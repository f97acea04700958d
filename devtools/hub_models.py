"""Small real-format models for tests and benchmarks, saved offline: random weights, fixed seeds, real tokenizers.

Each builder writes what `attention_viz.hub.load_pretrained(folder)` reads from the Hub: a config, safetensors
weights, a generation config and the family's own tokenizer class in its own file layout, trained here in well
under a second on a small English and German corpus. Nothing is downloaded.

    family   tokenizer (what AutoTokenizer gives back)   as the real checkpoints have it
    marian   MarianTokenizer: source.spm, target.spm,    </s> = 0, <unk> = 1, <pad> last = decoder start; <pad>
             vocab.json (a SentencePiece unigram)         banned, </s> forced at the end (opus-mt-*)
    bart     RobertaTokenizer (byte-level BPE)            <s> 0, <pad> 1, </s> 2 = decoder start; <s> forced first,
                                                          </s> last, no repeated trigram (bart-large-cnn's rules)
    mbart    MBartTokenizer (a SentencePiece unigram,     text </s> en_XX; decoder start </s>, the target language
             25 language codes, <mask> last)              de_DE forced first (mbart-large-50's way)
    bert     BertTokenizer (WordPiece, lower case)        [PAD] 0, [CLS] text [SEP] (a masked language model)
    gpt2     GPT2Tokenizer (byte-level BPE)               <|endoftext|> = bos = eos, no <pad>
    llama    LlamaTokenizer (BPE with byte fallback,      <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF>; <s> added, no
             ▁ for spaces: Llama 2's layout)              <pad>; 4 query heads share 2 key/value heads
    qwen2    Qwen2Tokenizer (byte-level BPE, NFC)         <|endoftext|> = eos = pad, no bos, <|im_start|>,
                                                          <|im_end|> last; the vocabulary padded to a multiple of
                                                          64 beyond the tokenizer's; tied embeddings; 2 kv heads

    save_tiny("marian", folder)              # 2 + 2 layers, 4 heads, d_model 32
    save_opus_mt_en_de_random(folder)        # Helsinki-NLP/opus-mt-en-de's configuration (74M parameters)

The tiny models' weights are drawn with a wider spread than the families' own initialisation (std 0.2 instead of
0.02): at 0.02 a tiny model mostly repeats its input token (BART wrote </s> at once), so greedy decoding would
prove little.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

FAMILIES = ("marian", "bart", "mbart", "bert", "gpt2", "llama", "qwen2")
INIT_STD = 0.2  # the tiny models' weights' spread (see the module's docstring)
CORPUS = [
    "the cat sat on the mat", "attention is all you need", "the model reads every word of the sentence",
    "die katze sitzt auf der matte", "aufmerksamkeit ist alles, was man braucht", "guten morgen, wie geht es dir?",
    "hello world, how are you today?", "queries and keys meet in a dot product",
    "the decoder writes one token at a time",
    "ein haus, ein baum und ein grünes feld", "naïve café, Grüße aus Köln",
    "numbers like 2026 and 512 appear too",
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
         "city country world school book paper table window door water coffee music friend family child "
         "children").split()


def _corpus(sentences: int = 0) -> list[str]:
    """The corpus: CORPUS, and `sentences` more made of WORDS (seeded)."""
    import random

    rng = random.Random(0)
    made = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))).capitalize() + "."
            for _ in range(sentences)]
    return CORPUS * 8 + made


def _corpus_file(folder: Path, sentences: int = 0) -> Path:
    """The corpus as a text file in `folder`, one sentence a line."""
    path = folder / "corpus.txt"
    path.write_text("\n".join(_corpus(sentences)), encoding="utf-8")
    return path


def _trained(build, vocab_size: int, specials: list[str], alphabet: list[str] | None = None) -> dict:
    """A BPE (`build()`: a tokenizers.Tokenizer) trained on the corpus -> its state (vocab, merges as pairs)."""
    from tokenizers import trainers

    tokenizer = build()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=alphabet or [])
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.train([str(_corpus_file(Path(tmp)))], trainer)
    state = json.loads(tokenizer.to_str())["model"]
    state["merges"] = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in state["merges"]]
    return state


def _byte_level_bpe(specials: list[str], vocab_size: int = 400):
    """A byte-level BPE trained on the corpus (the tokenizers library), as a tokenizers.Tokenizer."""
    from tokenizers import ByteLevelBPETokenizer

    with tempfile.TemporaryDirectory() as tmp:
        bpe = ByteLevelBPETokenizer()
        bpe.train([str(_corpus_file(Path(tmp)))], vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    return bpe._tokenizer


def _sentencepiece(pieces: int, sentences: int = 0) -> bytes:
    """A SentencePiece unigram model trained on the corpus (with `sentences` more of WORDS): its serialized bytes,
    the same on every run (one thread, no file names inside)."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_corpus(sentences)), model_writer=model, vocab_size=pieces,
                                   character_coverage=1.0, model_type="unigram", hard_vocab_limit=False,
                                   num_threads=1, minloglevel=2)
    return model.getvalue()


def _marian_tokenizer(folder: Path, vocab_size: int | None = None, pieces: int = 120):
    """Marian's tokenizer files: source.spm and target.spm (one SentencePiece model here) and vocab.json, ordered as
    opus-mt's: </s> 0, <unk> 1, the pieces, <pad> last. With vocab_size, unused pieces fill the vocabulary up to it
    so that <pad> is vocab_size - 1, as in opus-mt (58,100 in opus-mt-en-de)."""
    import sentencepiece as spm
    from transformers import MarianTokenizer

    model = _sentencepiece(pieces, sentences=0 if pieces <= 120 else 4000)
    (folder / "source.spm").write_bytes(model)
    (folder / "target.spm").write_bytes(model)
    processor = spm.SentencePieceProcessor(model_proto=model)
    ordered = ["</s>", "<unk>"] + [processor.id_to_piece(i) for i in range(processor.get_piece_size())
                                   if processor.id_to_piece(i) not in ("</s>", "<unk>", "<s>")]
    if vocab_size is not None:
        ordered += [f"<unused{i}>" for i in range(vocab_size - 1 - len(ordered))]
    ordered.append("<pad>")
    (folder / "vocab.json").write_text(json.dumps({piece: i for i, piece in enumerate(ordered)}), encoding="utf-8")
    tokenizer = MarianTokenizer(vocab=str(folder / "vocab.json"), source_spm=str(folder / "source.spm"),
                                target_spm=str(folder / "target.spm"))
    tokenizer.save_pretrained(folder)
    return tokenizer


def _mbart_tokenizer():
    """mBART's own tokenizer: a SentencePiece unigram under fairseq's four specials, its 25 language codes and
    <mask> after the pieces; a source text is `text </s> en_XX`."""
    import sentencepiece as spm
    from transformers import MBartTokenizer
    from transformers.models.mbart.tokenization_mbart import FAIRSEQ_LANGUAGE_CODES

    processor = spm.SentencePieceProcessor(model_proto=_sentencepiece(200))
    specials = ("<s>", "<pad>", "</s>", "<unk>")
    vocab = [(piece, 0.0) for piece in specials]
    vocab += [(processor.id_to_piece(i), processor.get_score(i)) for i in range(processor.get_piece_size())
              if processor.id_to_piece(i) not in specials]
    vocab += [(code, 0.0) for code in FAIRSEQ_LANGUAGE_CODES] + [("<mask>", 0.0)]
    return MBartTokenizer(vocab=vocab, src_lang="en_XX", tgt_lang="de_DE")


def _bert_tokenizer(size: int = 300):
    """BERT's WordPiece, lower case and accents stripped: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4, every
    character of the corpus and of ASCII alone and as a ##continuation, then the corpus's most frequent words whole (ties alphabetical), up to
    `size` pieces. Counted here rather than by the tokenizers library's trainer, whose ties fall differently on each
    run."""
    import string
    from collections import Counter

    from tokenizers import normalizers, pre_tokenizers
    from transformers import BertTokenizer

    normalizer, splitter = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    words = Counter(word for line in _corpus() for word, _ in
                    splitter.pre_tokenize_str(normalizer.normalize_str(line)))
    characters = sorted({c for word in words for c in word} | set(string.ascii_lowercase + string.digits
                                                                    + string.punctuation))
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + characters + [f"##{c}" for c in characters]
    pieces += [w for w, _ in sorted(words.items(), key=lambda item: (-item[1], item[0])) if len(w) > 1]
    return BertTokenizer(vocab={piece: i for i, piece in enumerate(pieces[:size])}, do_lower_case=True)


def _llama_tokenizer():
    """Llama 2's tokenizer layout: a BPE over words that start with ▁, falling back to bytes; <unk> 0, <s> 1, </s> 2,
    the 256 byte pieces <0x00>..<0xFF>, then the merged pieces; <s> starts every text."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaTokenizer

    def build():
        tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
        return tokenizer

    state = _trained(build, 420, ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)])
    return LlamaTokenizer(vocab=state["vocab"], merges=state["merges"], add_bos_token=True, add_eos_token=False)


def _qwen2_tokenizer():
    """Qwen2's tokenizer: a byte-level BPE with its own pre-tokenizer and NFC; <|endoftext|> (end and padding),
    <|im_start|> and <|im_end|> as special tokens after the merged pieces; no bos."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import Qwen2Tokenizer

    def build():
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        return tokenizer

    state = _trained(build, 360, [], alphabet=pre_tokenizers.ByteLevel.alphabet())  # every byte a piece
    vocab = dict(state["vocab"])
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    for token in specials:
        vocab[token] = len(vocab)
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=state["merges"])
    tokenizer.add_tokens([AddedToken(token, special=True, normalized=False) for token in specials[1:]])
    return tokenizer


def _widen(model, std: float) -> None:
    """Redraw every weight matrix and embedding N(0, std) (norms and biases kept): a tiny model that does not only
    repeat its input (the module's docstring)."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() >= 2 and "embed_positions" not in name:  # Marian's sinusoids, BART's positions stay
                parameter.normal_(0.0, std)
    model.tie_weights()


def save_tiny(family: str, folder: Path, *, seed: int = 0, d_model: int = 32, n_heads: int = 4, layers: int = 2
              ) -> Path:
    """A small model of `family` (FAMILIES) with random weights and its real tokenizer, saved to `folder`.

    The config's special ids are the tokenizer's and its vocabulary covers every id the tokenizer gives."""
    import transformers as tf

    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of {FAMILIES}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ffn = 2 * d_model
    generation = {}
    if family == "marian":
        tokenizer = _marian_tokenizer(folder)
        pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
        config = tf.MarianConfig(vocab_size=len(tokenizer), d_model=d_model, encoder_layers=layers,
                                 decoder_layers=layers, encoder_attention_heads=n_heads,
                                 decoder_attention_heads=n_heads, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn,
                                 pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad,
                                 forced_eos_token_id=eos, max_position_embeddings=256, activation_function="swish",
                                 scale_embedding=True, static_position_embeddings=True)
        model_cls = tf.MarianMTModel
        generation = {"bad_words_ids": [[pad]], "forced_eos_token_id": eos}  # as opus-mt's: <pad> never written
    elif family in ("bart", "mbart"):
        if family == "bart":  # BART's own tokenizer class is RoBERTa's byte-level BPE: <s> text </s>
            tokenizer = tf.BartTokenizer(tokenizer_object=_byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>",
                                                                           "<mask>"]),
                                         bos_token="<s>", pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                         mask_token="<mask>")
            config_cls, model_cls = tf.BartConfig, tf.BartForConditionalGeneration
            generation = {"forced_bos_token_id": tokenizer.bos_token_id, "no_repeat_ngram_size": 3}
        else:
            tokenizer = _mbart_tokenizer()
            config_cls, model_cls = tf.MBartConfig, tf.MBartForConditionalGeneration
            generation = {"forced_bos_token_id": tokenizer.convert_tokens_to_ids("de_DE")}
        config = config_cls(vocab_size=len(tokenizer), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                            encoder_attention_heads=n_heads, decoder_attention_heads=n_heads, encoder_ffn_dim=ffn,
                            decoder_ffn_dim=ffn, pad_token_id=tokenizer.pad_token_id,
                            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                            decoder_start_token_id=tokenizer.eos_token_id,
                            forced_eos_token_id=tokenizer.eos_token_id, max_position_embeddings=256)
        generation["forced_eos_token_id"] = tokenizer.eos_token_id
    elif family == "bert":
        tokenizer = _bert_tokenizer()
        config = tf.BertConfig(vocab_size=len(tokenizer), hidden_size=d_model, num_hidden_layers=layers,
                               num_attention_heads=n_heads, intermediate_size=ffn,
                               pad_token_id=tokenizer.pad_token_id, max_position_embeddings=256,
                               architectures=["BertForMaskedLM"])
        model_cls = tf.BertForMaskedLM
    elif family == "gpt2":
        tokenizer = tf.GPT2Tokenizer(tokenizer_object=_byte_level_bpe(["<|endoftext|>"]))
        config = tf.GPT2Config(vocab_size=len(tokenizer), n_embd=d_model, n_layer=layers, n_head=n_heads,
                               n_positions=256, bos_token_id=tokenizer.eos_token_id,
                               eos_token_id=tokenizer.eos_token_id)
        model_cls = tf.GPT2LMHeadModel
    elif family == "llama":  # rotary positions, grouped-query attention (n_heads // 2 key/value heads)
        tokenizer = _llama_tokenizer()
        config = tf.LlamaConfig(vocab_size=len(tokenizer), hidden_size=d_model, num_hidden_layers=layers,
                                num_attention_heads=n_heads, num_key_value_heads=max(1, n_heads // 2),
                                intermediate_size=ffn, bos_token_id=tokenizer.bos_token_id,
                                eos_token_id=tokenizer.eos_token_id, max_position_embeddings=256,
                                tie_word_embeddings=False)
        model_cls = tf.LlamaForCausalLM
    else:  # qwen2: as llama, with biases on q, k, v
        tokenizer = _qwen2_tokenizer()
        config = tf.Qwen2Config(vocab_size=-(-len(tokenizer) // 64) * 64, hidden_size=d_model,
                                num_hidden_layers=layers, num_attention_heads=n_heads,
                                num_key_value_heads=max(1, n_heads // 2), intermediate_size=ffn,
                                bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                                max_position_embeddings=256, tie_word_embeddings=True)
        model_cls = tf.Qwen2ForCausalLM
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    _widen(model, INIT_STD)
    for name, value in generation.items():
        setattr(model.generation_config, name, value)
    model.save_pretrained(folder, safe_serialization=True)
    if family != "marian":  # Marian's files are written by _marian_tokenizer
        tokenizer.save_pretrained(folder)
    return folder


def save_opus_mt_en_de_random(folder: Path, *, seed: int = 0) -> Path:
    """Helsinki-NLP/opus-mt-en-de's configuration (d_model 512, 6 + 6 layers, 8 heads, d_ff 2048, vocabulary
    58,101, pad = decoder start = 58,100, </s> = 0, static sinusoidal positions, swish, scaled embeddings, one
    embedding shared by encoder, decoder and output) with random weights (the family's own initialisation) and a
    Marian tokenizer of ~600 SentencePiece pieces that knows everyday English words whole (a short sentence is
    about as many pieces as the real one makes). Unused pieces `<unused{i}>` fill the vocabulary between the pieces
    and <pad>, so that <pad> is 58,100 and </s> 0 where the real model has them; the ids of the words are not the
    real model's."""
    import transformers as tf

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _marian_tokenizer(folder, vocab_size=58101, pieces=600)
    if (tokenizer.pad_token_id, tokenizer.eos_token_id, len(tokenizer)) != (58100, 0, 58101):
        raise RuntimeError(f"the tokenizer's <pad>, </s> and size are {tokenizer.pad_token_id}, "
                           f"{tokenizer.eos_token_id}, {len(tokenizer)}; opus-mt-en-de has 58100, 0, 58101")
    torch.manual_seed(seed)
    config = tf.MarianConfig(vocab_size=58101, decoder_vocab_size=58101, d_model=512, encoder_layers=6,
                             decoder_layers=6, encoder_attention_heads=8, decoder_attention_heads=8,
                             encoder_ffn_dim=2048, decoder_ffn_dim=2048, pad_token_id=58100, eos_token_id=0,
                             decoder_start_token_id=58100, forced_eos_token_id=0, max_position_embeddings=512,
                             activation_function="swish", scale_embedding=True, normalize_before=False,
                             share_encoder_decoder_embeddings=True, static_position_embeddings=True,
                             architectures=["MarianMTModel"])
    model = tf.MarianMTModel(config).eval()
    model.generation_config.bad_words_ids = [[58100]]
    model.generation_config.forced_eos_token_id = 0
    model.save_pretrained(folder, safe_serialization=True)
    return folder


# Vision encoders: model_type -> (the transformers class saved, its config class, extra config fields). A two-tower
# model (CLIP, SigLIP) is saved whole, as its checkpoints are; load_pretrained reads its vision tower.
IMAGE_FAMILIES = {
    "vit": ("ViTModel", "ViTConfig", {}),
    "deit": ("DeiTModel", "DeiTConfig", {}),
    "beit": ("BeitModel", "BeitConfig", {}),
    "data2vec-vision": ("Data2VecVisionModel", "Data2VecVisionConfig", {}),
    "dinov2": ("Dinov2Model", "Dinov2Config", {}),
    "dinov2_with_registers": ("Dinov2WithRegistersModel", "Dinov2WithRegistersConfig", {"num_register_tokens": 4}),
    "clip": ("CLIPModel", "CLIPConfig", {}),
    "siglip": ("SiglipModel", "SiglipConfig", {}),
}


def save_tiny_image(family: str, folder: Path, *, seed: int = 0, d_model: int = 32, n_heads: int = 4,
                    layers: int = 2, image_size: int = 32, patch_size: int = 8, **fields) -> Path:
    """A small vision encoder of this family (random weights, INIT_STD), saved as its checkpoints are: config.json,
    model.safetensors and the image processor's preprocessor_config.json (ViT's resize-and-normalise to
    image_size), no tokenizer. fields: more of its vision config's fields (BEiT's use_relative_position_bias)."""
    import transformers

    model_name, config_name, extra = IMAGE_FAMILIES[family]
    vision = dict(image_size=image_size, patch_size=patch_size, hidden_size=d_model, num_hidden_layers=layers,
                  num_attention_heads=n_heads, intermediate_size=2 * d_model, **(extra | fields))
    if family in ("clip", "siglip"):
        text = dict(hidden_size=d_model, num_hidden_layers=1, num_attention_heads=n_heads,
                    intermediate_size=2 * d_model, vocab_size=64, bos_token_id=0, eos_token_id=1, pad_token_id=1)
        config = getattr(transformers, config_name)(text_config=text, vision_config=vision)
    else:
        config = getattr(transformers, config_name)(**vision)
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config)
    _widen(model, INIT_STD)
    folder = Path(folder)
    model.save_pretrained(folder)
    # the PIL processor: transformers' default one needs torchvision, which attention_viz does not install
    transformers.ViTImageProcessorPil(size={"height": image_size, "width": image_size}).save_pretrained(folder)
    return folder


WHISPER_SPECIALS = ["<|startoftranscript|>", "<|en|>", "<|de|>", "<|translate|>", "<|transcribe|>", "<|startoflm|>",
                    "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]


def save_tiny_whisper(folder: Path, *, seed: int = 0, d_model: int = 32, n_heads: int = 4, layers: int = 2,
                      seconds: int = 1) -> Path:
    """A small Whisper (random weights, INIT_STD) saved as its checkpoints are: config.json, model.safetensors,
    generation_config.json (its start, language and task tokens, as whisper-tiny's), preprocessor_config.json (the
    log-mel extractor, its window `seconds` long: 100 frames a second, 50 encoder positions) and a byte-level BPE
    WhisperTokenizer with Whisper's special tokens."""
    import transformers as tf

    state = json.loads(_byte_level_bpe(["<|endoftext|>"], vocab_size=300).to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in state["merges"]]
    tokenizer = tf.WhisperTokenizer(vocab=state["vocab"], merges=merges)
    tokenizer.add_special_tokens({"additional_special_tokens": WHISPER_SPECIALS})
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in ["<|endoftext|>", *WHISPER_SPECIALS]}
    end, start = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    positions = 50 * seconds
    config = tf.WhisperConfig(vocab_size=len(tokenizer), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                              encoder_attention_heads=n_heads, decoder_attention_heads=n_heads,
                              encoder_ffn_dim=2 * d_model, decoder_ffn_dim=2 * d_model, num_mel_bins=80,
                              max_source_positions=positions, max_target_positions=64, pad_token_id=end,
                              bos_token_id=end, eos_token_id=end, decoder_start_token_id=start,
                              begin_suppress_tokens=[end], suppress_tokens=[])
    torch.manual_seed(seed)
    model = tf.WhisperForConditionalGeneration(config)
    _widen(model, INIT_STD)
    folder = Path(folder)
    model.generation_config = tf.GenerationConfig(
        decoder_start_token_id=start, eos_token_id=end, pad_token_id=end, bos_token_id=end, max_length=64,
        begin_suppress_tokens=[end], suppress_tokens=[], is_multilingual=True,
        lang_to_id={"<|en|>": ids["<|en|>"], "<|de|>": ids["<|de|>"]},
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"])
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    tf.WhisperFeatureExtractor(feature_size=80, chunk_length=seconds).save_pretrained(folder)
    return folder
