"""A model folder's checks, each refusal a sentence for a web visitor: before transformers reads the folder (its
JSON files, its safetensors headers, its tokenizer files) and after (weights that do not fit the config, a tokenizer
that does not fit the model). A pickle (`pytorch_model.bin`, `.pt`, `.ckpt`) can run code when it is opened, so a
folder with only pickled weights is refused before anything is read. hub.loading runs them.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import torch

from attention_viz.hub import images, speech
from attention_viz.hub.families import ModelRefusedError, UnsupportedModelError, family_of
from attention_viz.hub.proof import vocabulary_size

PICKLED = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")
# The files a tokenizer is built from (tokenizer_config.json alone describes one; it holds no vocabulary).
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt", "merges.txt", "*.model", "*.spm", "*.tiktoken")
# Tokenizers whose vocabulary is the bytes themselves: tokenizer_config.json naming one is all they read (ByT5).
BYTE_TOKENIZERS = ("ByT5Tokenizer",)
SHOWN_DETAIL = 200  # characters of a library's own message kept in a refusal


class UnsafeWeightsError(ModelRefusedError):
    """Weights that are not safetensors (a pickle can run code when opened): refused, never read."""


def shown_name(name_or_path: str | Path) -> str:
    """A model as a message names it: a Hub id as it is, a folder by its own name (a Hugging Face cache snapshot by
    its repository's id), never a server path."""
    path = Path(name_or_path).expanduser()
    if not path.is_dir():
        return path.name if path.is_absolute() or str(name_or_path).startswith((".", "~")) else str(name_or_path)
    repository = path.parent.parent.name  # .../models--owner--name/snapshots/<commit>
    if path.parent.name == "snapshots" and repository.startswith("models--"):
        return repository[len("models--"):].replace("--", "/")
    return path.resolve().name


def refused(shown: str, reason: str, kind: type[ModelRefusedError] = ModelRefusedError) -> ModelRefusedError:
    """The refusal of a model: "The model 'name' was refused: reason." """
    return kind(f"The model {shown!r} was refused: {reason.rstrip('.')}.")


def detail(error: BaseException, folder: Path, shown: str) -> str:
    """A library's message, fit to show: its last line, the folder's path replaced by the model's name, cut short."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[-1] if lines else type(error).__name__
    for path in {str(folder), str(folder.resolve())}:
        text = text.replace(path, shown)
    return text if len(text) <= SHOWN_DETAIL else text[: SHOWN_DETAIL - 1] + "…"


def check_folder(path: Path, shown: str | None = None) -> None:
    """Refuse a model folder, before transformers reads it, whose files are missing or unreadable: config.json,
    every top-level JSON file, the weights (safetensors only; a pickle is never opened) and the tokenizer's files."""
    shown = shown or shown_name(path)
    config = path / "config.json"
    if not config.is_file():
        raise refused(shown, "its folder holds no config.json")
    for file in sorted(path.glob("*.json")):
        try:
            json.loads(file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            where = f" (line {error.lineno}, column {error.colno})" if isinstance(error, json.JSONDecodeError) else ""
            raise refused(shown, f"its {file.name} is not valid JSON{where}") from None
    raw = json.loads(config.read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or not isinstance(raw.get("model_type"), str):
        raise refused(shown, "its config.json names no model_type")
    try:  # a model known not to work, or one transformers does not know, before any weight is read
        family_of(SimpleNamespace(model_type=raw["model_type"]))
    except UnsupportedModelError as error:
        own_code = "; its own code (auto_map in config.json) is never run" if "auto_map" in raw else ""
        raise refused(shown, f"{str(error).rstrip('.')}{own_code}", UnsupportedModelError) from None
    check_weights(path, shown)
    if (images.is_vision(raw) or speech.is_speech(raw)) and not (path / "preprocessor_config.json").is_file():
        what = "image processor's settings an image model reads its pictures" if images.is_vision(raw) else \
            "feature extractor's settings a speech model reads its recordings"
        raise refused(shown, f"its folder holds no preprocessor_config.json, the {what} with")
    if images.is_vision(raw):
        return
    if not any(any(path.glob(pattern)) for pattern in TOKENIZER_FILES) and not reads_bytes(path):
        raise refused(shown, "its folder holds no tokenizer files (tokenizer.json, or the vocabulary files of its "
                             "tokenizer: vocab.json and merges.txt, vocab.txt, *.model or *.spm)")


def reads_bytes(path: Path) -> bool:
    """Whether the folder's tokenizer_config.json names a tokenizer whose vocabulary is the bytes (BYTE_TOKENIZERS)."""
    own = path / "tokenizer_config.json"
    raw = json.loads(own.read_text(encoding="utf-8")) if own.is_file() else None
    return isinstance(raw, dict) and raw.get("tokenizer_class") in BYTE_TOKENIZERS


def check_weights(path: Path, shown: str) -> None:
    """Refuse a folder whose weights are pickled only, missing, or not readable safetensors (each file's header is
    read; a shard that an index names must be there)."""
    from safetensors import SafetensorError, safe_open

    files = sorted(path.glob("*.safetensors"))
    pickled = sorted(p.name for pattern in PICKLED for p in path.glob(pattern))
    if not files and pickled:
        raise refused(shown, f"its weights are pickled ({', '.join(pickled[:3])}), which can run code when opened; "
                             "attention_viz loads safetensors only. Convert them once, where you trust them, with "
                             "`model.save_pretrained(folder, safe_serialization=True)`", UnsafeWeightsError)
    if not files:
        raise refused(shown, "its folder holds no weights (model.safetensors)")
    index = path / "model.safetensors.index.json"
    if index.is_file():
        shards = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values()
        absent = sorted({shard for shard in shards if not (path / shard).is_file()})
        if absent:
            raise refused(shown, f"its weights index names {absent[0]}, which its folder does not hold")
    beside = f" (the pickled {pickled[0]} beside it is never opened)" if pickled else ""
    for file in files:
        if file.stat().st_size == 0:
            raise refused(shown, f"its weights file {file.name} is empty{beside}")
        try:
            with safe_open(str(file), framework="pt") as weights:
                weights.keys()
        except (SafetensorError, OSError) as error:
            reason = str(error).split(": ", 1)[-1]  # "Error while deserializing header: header too small"
            raise refused(shown, f"its weights file {file.name} is not a whole safetensors file ({reason})"
                                 f"{beside}") from None


def check_model(model, loading: dict, shown: str) -> None:
    """Refuse weights that do not fit the config (a tensor of another shape, one missing) or that are not finite."""
    mismatched = sorted(loading.get("mismatched_keys") or [])
    if mismatched:
        key, stored, expected = mismatched[0]
        more = f" (and {len(mismatched) - 1} more tensor{'s' * (len(mismatched) > 2)})" if len(mismatched) > 1 else ""
        raise refused(shown, f"its weights hold {key} as {list(stored)}, but its config.json makes it "
                             f"{list(expected)}{more}")
    missing = sorted(loading.get("missing_keys") or [])
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise refused(shown, f"its weights lack {missing[0]}{more}")
    from attention_viz.hub.placement import weights

    with torch.no_grad():
        for name, parameter in weights(model):  # an offloaded weight read where it is kept; a sum is NaN or infinite when any value is (one pass)
            wide = torch.float64 if parameter.dtype == torch.float64 else torch.float32
            if not torch.isfinite(parameter.sum(dtype=wide)):
                raise refused(shown, f"its weights hold values that are not finite (NaN or infinite) in {name}")


def check_tokenizer(model, tokenizer, shown: str) -> None:
    """Refuse a tokenizer that does not fit the model: an empty one (only special tokens), ids past the embedding
    matrix, or special ids (pad, end, start, decoder start) that disagree with the config or lie outside it."""
    rows = vocabulary_size(model)
    vocabulary = tokenizer.get_vocab()
    if len(vocabulary) <= len(set(tokenizer.all_special_ids)):
        raise refused(shown, f"its tokenizer is empty: it knows nothing but its special tokens ({len(vocabulary)})")
    top = max(vocabulary.values())
    if top >= rows:
        raise refused(shown, f"its tokenizer has ids up to {top}, past its embedding matrix's {rows} rows "
                             "(vocab_size in config.json)")
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    generation = getattr(model, "generation_config", None)

    def ids(name: str, sources=(config, generation)) -> set[int]:
        """The ids the config (and the generation config) give this field."""
        found = set()
        for source in sources:
            value = getattr(source, name, None) if source is not None else None
            found |= set(value if isinstance(value, list) else [] if value is None else [value])
        return found

    for name in ("pad", "eos", "bos"):  # the end token may be any of those generation stops at
        own = getattr(tokenizer, f"{name}_token_id", None)
        configured = ids(f"{name}_token_id", (config, generation) if name == "eos" else (config,))
        if own is not None and configured and own not in configured:
            raise refused(shown, f"its tokenizer's {name} token is id {own}, but its config says "
                                 f"{name}_token_id = {min(configured) if len(configured) == 1 else sorted(configured)}")
    for name in ("pad_token_id", "eos_token_id", "bos_token_id", "decoder_start_token_id"):
        outside = sorted(i for i in ids(name) if not 0 <= i < rows)
        if outside:
            raise refused(shown, f"its config's {name} = {outside[0]} lies outside its {rows} embedding rows")
    if family_of(model.config).layout == "encoder-decoder" and not ids("decoder_start_token_id"):
        raise refused(shown, "its config names no decoder_start_token_id, which its decoder needs to begin")


def lacking_tokenizer_files(folder: Path) -> str:
    """After a tokenizer failed to build: the files its class reads that the folder lacks ("" if none or unknown)."""
    import transformers
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES

    own = folder / "tokenizer_config.json"
    name = json.loads(own.read_text(encoding="utf-8")).get("tokenizer_class") if own.is_file() else None
    name = name or TOKENIZER_MAPPING_NAMES.get(json.loads((folder / "config.json").read_text())["model_type"])
    reads = [file for file in getattr(getattr(transformers, str(name), None), "vocab_files_names", {}).values()
             if file not in ("tokenizer_config.json", "tokenizer.json", "target_vocab.json")]  # optional ones
    absent = [file for file in reads if not (folder / file).is_file()]
    if not absent:
        return ""
    return f"its tokenizer ({name}) reads {', '.join(reads)}, and its folder lacks {', '.join(absent)}"
