"""Tiny models of every text architecture that transformers knows, built offline in milliseconds each.

The model types come from transformers' own auto mappings (causal LM, seq2seq LM, masked LM and base models,
transformers.models.auto.modeling_auto). Each is sorted once (`architectures()`): a text model is built; anything
else is skipped with the reason (its forward takes pixels or audio, its config holds a vision or audio part, it is
another type's classes under a second name, it needs a library that is not installed).

A text model is built from its own config class with the sizes shrunk (TINY: width 64, 2 layers, 4 heads with 2
key/value heads where the config has them, feed-forward 64, vocabulary 128, 4 experts with 2 per token, 64
positions) and what makes it special kept but shrunk to act on a probe of 8 tokens (a sliding window of 4, every
kind of layer its layer_types list names once); float32, a fixed seed, and its weight matrices redrawn wider as
devtools.hub_models._widen does, so that its outputs are not trivial. Its tokenizer is one character a token over
printable ASCII (tokenizers' WordLevel, as a PreTrainedTokenizerFast) with <pad> 0, <s> 1, </s> 2, <unk> 3,
<mask> 4, the ids its config is given.

    model, tokenizer = tiny("llama")                   # the default head: seq2seq > masked LM > causal LM > base
    save("gemma2", folder)                             # what hub.load_pretrained(folder) reads offline
    for arch in architectures(): arch.model_type, arch.head, arch.skipped
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import string
from dataclasses import dataclass
from pathlib import Path

import torch

HEADS = ("seq2seq", "masked-lm", "causal-lm", "base")  # the default head of a type: the first it has
MAPPINGS = {"seq2seq": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "masked-lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
            "causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "base": "MODEL_MAPPING_NAMES"}
INIT_STD = 0.2  # devtools.hub_models.INIT_STD: weights wide enough that a tiny model does more than copy its input
SEED = 0
MAX_PARAMETERS = 3_000_000  # a tiny model has ~0.1M; more means a size field was missed
PAD, BOS, EOS, UNK, MASK = 0, 1, 2, 3, 4
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>", "<mask>")
VOCAB = 128  # the config's vocabulary; the tokenizer's 100 ids (5 specials + 95 printable characters) fit in it
WIDTH, HEADS_N, KV_HEADS, HEAD_DIM, FFN, LAYERS = 64, 4, 2, 16, 64, 2

# Config fields set where the config class declares them (a field it lacks is never added).
TINY = {
    # width
    "hidden_size": WIDTH, "d_model": WIDTH, "n_embd": WIDTH, "embed_dim": WIDTH, "dim": WIDTH, "emb_dim": WIDTH,
    "word_embed_proj_dim": WIDTH, "embedding_size": WIDTH, "d_embed": WIDTH,
    # depth
    "num_hidden_layers": LAYERS, "n_layer": LAYERS, "n_layers": LAYERS, "num_layers": LAYERS,
    "encoder_layers": LAYERS, "decoder_layers": LAYERS, "num_decoder_layers": LAYERS, "num_encoder_layers": LAYERS,
    # heads
    "num_attention_heads": HEADS_N, "n_head": HEADS_N, "n_heads": HEADS_N, "num_heads": HEADS_N,
    "encoder_attention_heads": HEADS_N, "decoder_attention_heads": HEADS_N,
    "num_key_value_heads": KV_HEADS, "num_kv_heads": KV_HEADS, "n_kv_heads": KV_HEADS, "num_kv_groups": KV_HEADS,
    "head_dim": HEAD_DIM, "d_kv": HEAD_DIM, "attention_head_dim": HEAD_DIM, "kv_channels": HEAD_DIM,
    # a sliding-window layer's own (Inkling's: as released, as many heads as its full layers)
    "swa_num_attention_heads": HEADS_N, "swa_num_key_value_heads": KV_HEADS, "swa_head_dim": HEAD_DIM,
    # multi-head latent attention (DeepSeek's)
    "kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": HEAD_DIM,
    "qk_head_dim": 16,
    # feed-forward and experts
    "intermediate_size": FFN, "ffn_dim": FFN, "encoder_ffn_dim": FFN, "decoder_ffn_dim": FFN, "n_inner": FFN,
    "d_ff": FFN, "ffn_hidden_size": FFN, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
    "expert_intermediate_size": 32, "moe_ffn_hidden_size": 32, "shared_experts_intermediate_size": 32,
    "vocab_size_per_layer_input": VOCAB, "hidden_size_per_layer_input": 16, "laurel_rank": 8,
    "index_topk": 4, "index_head_dim": 16, "index_n_heads": 2,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_k": 2, "moe_topk": 2, "n_group": 1, "topk_group": 1,
    # state-space and linear-attention layers of hybrid models (sized down: their scans dominate a tiny model's time)
    "mamba_n_heads": HEADS_N, "mamba_num_heads": HEADS_N, "mamba_d_head": 2 * HEAD_DIM,
    "mamba_head_dim": 2 * HEAD_DIM, "mamba_d_ssm": 2 * WIDTH,  # heads x head width = expand (2) x width "mamba_d_state": 8, "ssm_state_size": 8, "state_size": 8,
    "mamba_chunk_size": 8, "n_groups": 1, "mamba_n_groups": 1, "linear_num_heads": HEADS_N, "linear_head_dim": HEAD_DIM,
    "linear_num_key_heads": KV_HEADS,
    "linear_num_value_heads": HEADS_N, "linear_key_head_dim": HEAD_DIM, "linear_value_head_dim": HEAD_DIM,
    # vocabulary, positions, windows
    "vocab_size": VOCAB, "max_position_embeddings": 64, "n_positions": 64, "n_ctx": 64,
    "sliding_window": 4, "sliding_window_size": 4, "local_attention": 4, "attention_chunk_size": 4, "rotary_dim": 8,
    "attention_window": 4, "local_radius": 2,
    # special ids (the tokenizer's)
    "pad_token_id": PAD, "bos_token_id": BOS, "eos_token_id": EOS, "decoder_start_token_id": BOS,
    "sep_token_id": EOS, "cls_token_id": BOS, "mask_token_id": MASK,
    "tie_word_embeddings": False,
}

# Media inputs: a forward that takes one of these is not a text model's.
MEDIA = ("pixel_values", "input_features", "input_values", "past_values", "pixel_values_videos", "audio_values",
         "flattened_patches", "image_embeds", "input_points", "visual_embeds", "visual_feats", "bbox", "xpath_tags_seq")
# Config fields of vision, audio and time-series models.
MEDIA_FIELDS = {"image_size", "patch_size", "num_channels", "num_mel_bins", "sampling_rate", "prediction_length"}
# Sub-configs of a model that is more than text.
MEDIA_CONFIGS = ("vision", "audio", "speech", "image", "codec", "vq", "video", "protein", "patcher", "backbone",
                 "vocoder", "flow_head", "depth_decoder")
# Types whose classes take token ids but whose tokens are not text (or that are two models in one).
NOT_TEXT = {
    "musicgen": "its tokens are audio codes (a text-to-music decoder)",
    "musicgen_melody": "its tokens are audio codes (a text-to-music decoder)",
    "moshi": "a speech model: its tokens include audio codes",
    "vits": "a text-to-speech model (it outputs a waveform)",
    "fastspeech2_conformer": "a text-to-speech model (it outputs a spectrogram)",
    "fastspeech2_conformer_with_hifigan": "a text-to-speech model (it outputs a waveform)",
    "dia": "a text-to-speech model (its decoder writes audio codes)",
    "pocket_tts": "a text-to-speech model",
    "gradium_phonon_tts": "a text-to-speech model",
    "higgs_audio_v2": "a text-to-speech model (its decoder writes audio codes)",
    "kyutai_speech_to_text": "a speech-to-text model (its input is audio codes)",
    "csm": "a speech model (its decoder writes audio codes)",
    "whisper": "the decoder of a speech-to-text model (it cross-attends to audio)",
    "imagegpt": "its tokens are pixels (an image model)",
    "gemma4_assistant": "a drafting head that reads another model's hidden states, not a model on its own",
    "gemma4_unified_assistant": "a drafting head that reads another model's hidden states, not a model on its own",
    "encoder-decoder": "a composite of any encoder and decoder, each another type here",
    "evolla": "a protein-and-text model (its encoder reads protein sequences)",
    "clvp": "a speech model (text conditions speech tokens)",
}


@dataclass(frozen=True)
class Arch:
    """One model type as this module sorts it: its default head and class, or why it is skipped."""

    model_type: str
    head: str                     # the first of HEADS the type has
    class_name: str               # transformers' class for that head
    skipped: str | None = None    # why no tiny model is built (None: it is built)


@functools.cache
def _mappings() -> dict[str, dict[str, str]]:
    """head -> {model type: class name}, from transformers' auto mappings."""
    from transformers.models.auto import modeling_auto

    found = {}
    for head, name in MAPPINGS.items():
        found[head] = {t: (c[0] if isinstance(c, (tuple, list)) else c) for t, c in getattr(modeling_auto, name).items()}
    return found


def _class(name: str):
    """A transformers class by name (ImportError with transformers' message when a library is missing)."""
    import transformers

    try:
        return getattr(transformers, name)
    except AttributeError:
        raise ImportError(f"transformers has no class {name}") from None


def architectures() -> tuple[Arch, ...]:
    """Every model type of the four auto mappings, sorted into text models (built) and the rest (skipped, why)."""
    return tuple(arch(model_type) for model_type in model_types())


def model_types() -> list[str]:
    """Every model type the four auto mappings hold, sorted (cheap: no model class is imported)."""
    return sorted({t for mapping in _mappings().values() for t in mapping})


@functools.cache
def arch(model_type: str) -> Arch:
    """One model type, sorted (ValueError for a type transformers' mappings do not hold)."""
    mappings = _mappings()
    heads = [h for h in HEADS if model_type in mappings[h]]
    if not heads:
        raise ValueError(f"{model_type!r} is not a model type of transformers' auto mappings")
    name = mappings[heads[0]][model_type]
    return Arch(model_type, heads[0], name, _why_skipped(model_type, name))


def _why_skipped(model_type: str, class_name: str) -> str | None:
    """Why a model type gets no tiny text model (None: it gets one). Its config is read first (cheap); its model
    class is imported only for a config that could be a text model's."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type in NOT_TEXT:
        return NOT_TEXT[model_type]
    try:
        config_cls = CONFIG_MAPPING[model_type]
    except Exception as error:  # noqa: BLE001 - a config transformers cannot import here
        return f"its config cannot be imported here ({_first_line(error)})"
    subs = [s for s in getattr(config_cls, "sub_configs", None) or {} if any(m in s for m in MEDIA_CONFIGS)]
    if subs:
        return f"not a text model only: its config holds {', '.join(subs)}"
    fields = _fields(config_cls)
    if not fields & {"vocab_size", "src_vocab_size"}:
        return "not a text model: its config has no vocabulary"
    if fields & MEDIA_FIELDS:
        return f"not a text model only: its config sets {', '.join(sorted(fields & MEDIA_FIELDS))}"
    try:
        cls = _class(class_name)
        forward = inspect.signature(cls.forward).parameters
    except Exception as error:  # noqa: BLE001 - a missing optional library: transformers' ImportError
        return f"its classes cannot be imported here ({_first_line(error)})"
    own_type = getattr(getattr(cls, "config_class", None), "model_type", model_type)
    if own_type != model_type:
        return f"another name for {own_type}'s classes ({class_name})"
    media = [p for p in forward if p in MEDIA]
    if "input_ids" not in forward:
        return f"not a text model: {class_name}.forward takes no input_ids ({', '.join(media) or 'other inputs'})"
    if media:
        return f"not a text model only: {class_name}.forward takes {', '.join(media)}"
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:120]


def text_architectures() -> list[Arch]:
    """The model types that get a tiny model."""
    return [arch for arch in architectures() if arch.skipped is None]


def _fields(config_cls) -> set[str]:
    """The fields a config class declares (its dataclass fields, or its __init__'s parameters)."""
    if dataclasses.is_dataclass(config_cls):
        return {f.name for f in dataclasses.fields(config_cls)}
    return set(inspect.signature(config_cls.__init__).parameters) - {"self", "kwargs"}


def tiny_config(model_type: str):
    """The type's own config class with TINY's sizes, its sliding window, soft-caps and kinds of layer kept."""
    from transformers import AutoConfig

    config = _shrunk(type(AutoConfig.for_model(model_type)), QUIRKS.get(model_type, {}))
    config._attn_implementation = "eager"
    return config


def _shrunk(config_cls, quirks: dict):
    """An instance of config_cls with TINY's sizes (its text sub-configs shrunk alike) and `quirks` over them."""
    fields = _fields(config_cls)
    settings = {name: value for name, value in TINY.items() if name in fields}
    default = config_cls()
    kinds = list(dict.fromkeys(getattr(default, "layer_types", None) or []))
    kinds.sort(key=lambda kind: "attention" not in kind)  # attention first: some hybrids ask layer 0 for the cache
    if len(kinds) > 1 and "layer_types" in fields:  # every kind of layer once (sliding and full, linear and full)
        settings["layer_types"] = kinds
        for depth in ("num_hidden_layers", "n_layer", "num_layers"):
            if depth in settings:
                settings[depth] = len(kinds)
    if "kv_lora_rank" in settings and "num_key_value_heads" in settings:  # latent attention: a key per query head
        settings["num_key_value_heads"] = HEADS_N
    for name in ("attn_logit_softcapping", "final_logit_softcapping"):  # kept, shrunk to act at the tiny width
        if getattr(default, name, None):
            settings[name] = 5.0
    rope = getattr(default, "rope_parameters", None)
    if isinstance(rope, dict) and rope and _tiny_rope(rope, settings) != rope:
        settings["rope_parameters"] = _tiny_rope(rope, settings)
    for name, sub_cls in (getattr(config_cls, "sub_configs", None) or {}).items():
        if name in fields and isinstance(sub_cls, type):
            settings[name] = _shrunk(sub_cls, quirks.get(name, {}))
    settings.update({k: v for k, v in quirks.items() if not isinstance(v, dict) or k not in settings})
    return config_cls(**{k: v for k, v in settings.items() if v is not DROP})


def _tiny_rope(rope: dict, settings: dict) -> dict:
    """A rope_parameters dict with its lengths shrunk to the tiny model's positions and its multimodal sections
    (mrope_section) summing to half the rotated width."""
    rope = dict(rope)
    if "original_max_position_embeddings" in rope:  # YaRN and its kin: 64 positions stretched from 32
        rope["original_max_position_embeddings"] = 32
        if "factor" in rope:
            rope["factor"] = 2.0
    if isinstance(rope.get("mrope_section"), list) and len(rope["mrope_section"]) == 3:
        half = settings.get("qk_rope_head_dim", settings.get("head_dim", HEAD_DIM)) // 2
        rope["mrope_section"] = [half - 2 * (half // 4), half // 4, half // 4]
    return rope


DROP = object()  # a QUIRKS value that removes a setting TINY or the layer kinds made
# Per-type settings over TINY's (each for the reason its comment gives); a dict value applies to that sub-config.
QUIRKS: dict[str, dict] = {
    "esmc": {"num_key_value_heads": HEADS_N},             # no grouped-query attention in these
    "glm5_next_text": {"num_key_value_heads": HEADS_N, "index_topk": 16},
    "dots3_note_text": {"num_key_value_heads": HEADS_N},
    "dots1": {"n_shared_experts": 1},                     # its default (None) does not build
    "zaya": {"num_experts_per_tok": 1},                   # one expert a token only
    "mamba2": {"head_dim": 32},                           # hidden_size * expand = num_heads * head_dim
    "gpt_neo": {"attention_types": [[["global", "local"], 1]], "window_size": 4},
    "gemma3n_text": {"layer_types": ["sliding_attention", "full_attention"] * 2, "num_hidden_layers": 4,
                     "num_kv_shared_layers": 2},          # the last two layers share the first two's keys
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    # hybrids whose full-size default puts no attention in the first two layers: a state-space layer, then attention
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    "bamba": {"attn_layer_indices": [1]},
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1},
    "zamba": {"layers_block_type": ["linear_attention", "hybrid"]},
    "zamba2": {"layers_block_type": ["linear_attention", "hybrid"]},
    "qwen4_exp_text": {"indexer_kv_heads": 1, "indexer_budget": 4, "indexer_compress_ratio": 2},
    "reformer": {"axial_pos_shape": [8, 8], "axial_pos_embds_dim": [32, 32], "local_attn_chunk_length": 4,
                 "lsh_attn_chunk_length": 4, "attn_layers": ["local", "lsh"], "num_buckets": 4},
    "cohere_compass_text": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0,
                                                                   "mrope_section": [4, 2, 2]}}},
    "dbrx": {"attn_config": {"kv_n_heads": KV_HEADS, "rope_theta": 10000.0, "clip_qkv": 8.0}, "ffn_config": {"ffn_hidden_size": FFN, "moe_num_experts": 4,
                                                                     "moe_top_k": 2}},
    "inkling2_text": {"unpadded_vocab_size": VOCAB, "sliding_window_size": 4},
    "inkling2_loop_text": {"unpadded_vocab_size": VOCAB, "sliding_window_size": 4},
    "muse_spark_text": {"moe_hidden_size": 32},
    # DeBERTa v3's layout (the default config has no relative attention): both position terms, shared projections,
    # log buckets past 4 positions
    "deberta-v2": {"relative_attention": True, "pos_att_type": ["p2c", "c2p"], "position_buckets": 8,
                   "share_att_key": True, "norm_rel_ebd": "layer_norm"},
    # DeBERTa v1 as released (deberta-base): both position terms (its default config has no relative attention)
    "deberta": {"relative_attention": True, "pos_att_type": ["c2p", "p2c"]},
    "luke": {"entity_vocab_size": 16, "entity_emb_size": 16},
    "roc_bert": {"pronunciation_embed_dim": 16, "pronunciation_vocab_size": 32, "shape_embed_dim": 16,
                 "shape_vocab_size": 32},
    "perceiver": {"num_latents": 8, "d_latents": WIDTH},
    "cpmant": {"dim_ff": FFN},
    "funnel": {"d_inner": FFN},
    "fsmt": {"src_vocab_size": VOCAB, "tgt_vocab_size": VOCAB},
    "bert-generation": {"is_decoder": True},  # its default head is BertGenerationDecoder, a decoder only so built
    "longcat_flash": {"zero_expert_num": 2, "expert_ffn_hidden_size": 32},
    **{t: {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]}}
       for t in ("qwen2_vl_text", "qwen2_5_vl_text", "glm4v_text", "glm_image_text", "glm_ocr_text")},
    "glm4v_moe_text": {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1]}},
}
# What a built model needs before it runs (the reason each is needed).
PREPARED = {"xmod": lambda model: model.set_default_language("en_XX")}  # one language adapter chosen


def tokenizer():
    """One printable ASCII character a token, SPECIALS first (<pad> 0, <s> 1, </s> 2, <unk> 3, <mask> 4)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pieces = list(SPECIALS) + list(string.printable[:95])  # digits, letters, punctuation, space
    tokens = Tokenizer(models.WordLevel({piece: i for i, piece in enumerate(pieces)}, unk_token="<unk>"))
    tokens.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tokens.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tokens, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", mask_token="<mask>", cls_token="<s>", sep_token="</s>")


def _widen(model, std: float = INIT_STD) -> None:
    """Every weight matrix and embedding redrawn N(0, std), norms and biases kept (devtools.hub_models._widen)."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() >= 2 and "embed_positions" not in name:
                parameter.normal_(0.0, std)
    model.tie_weights()


def tiny(model_type: str, head: str | None = None):
    """A tiny model of this type (its default head unless one of HEADS is named) and its tokenizer: (model, tokenizer).

    float32, eval mode, eager attention, seeded: the same weights on every call."""
    from transformers import GenerationConfig

    found = arch(model_type)
    if found.skipped:
        raise ValueError(f"{model_type} is not built here: {found.skipped}")
    head = head or found.head
    mappings = _mappings()
    if model_type not in mappings.get(head, {}):
        raise ValueError(f"{model_type} has no {head} class (it has: {[h for h in HEADS if model_type in mappings[h]]})")
    cls = _class(mappings[head][model_type])
    config = tiny_config(model_type)
    with torch.device("meta"):  # sized first, without memory: a field TINY missed would build a full-size model
        size = sum(p.numel() for p in cls(config).parameters())
    if size > MAX_PARAMETERS:
        raise ValueError(f"{model_type}'s tiny config still makes {size:,} parameters: a size field is not shrunk")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = cls(config)
        _widen(model)
    model.eval()
    if model_type in PREPARED:
        PREPARED[model_type](model)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config = GenerationConfig(pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
                                                   decoder_start_token_id=BOS if config.is_encoder_decoder else None)
    return model, tokenizer()


def save(model_type: str, folder: Path, head: str | None = None) -> Path:
    """tiny(model_type, head) written as a model folder (safetensors, config.json, generation_config.json,
    tokenizer.json) that attention_viz.hub.load_pretrained(folder) reads offline."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model, tokens = tiny(model_type, head)
    model.save_pretrained(folder, safe_serialization=True)
    tokens.save_pretrained(folder)
    return folder


if __name__ == "__main__":  # list what is built and what is skipped
    import collections

    for found in architectures():
        print(f"{found.model_type:34s} {found.head:10s} {found.class_name:42s} {found.skipped or 'built'}")
    print(collections.Counter("built" if a.skipped is None else "skipped" for a in architectures()))
