"""Checkpoints: safetensors weights plus a JSON card, loaded only through formats that cannot run code.

A checkpoint named NAME is two files side by side:
    NAME.safetensors   the weights (tensors only; no pickle, so loading it cannot execute anything)
    NAME.json          the card: {"name", "task", "scale", "config", "max_len", "alphabet", "seed", "steps",
                       "wall_time_s", "heldout_exact_match", "heldout_size", "n_params", "weights_dtype", "curve", ...}
The card's "scale" ("sqrt_dk" or "none") is how the model was trained, and the mode it should be run in.
The registry is the shipped folder `attention_viz/data/models` (package data); a name never reaches a path outside it.

Errors: CheckpointError (a ValueError), naming the file, for weights that are empty, truncated or corrupt, a card
that is not a JSON object, a config that does not build or does not describe the weights, and a trainer's card whose
config or copies contradict its own "settings"; UnsafeCheckpointError, a CheckpointError, for files that are not
safetensors at all (a pickle is refused, never opened).
"""

from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model as load_safetensors_into
from safetensors.torch import save_file

from attention_viz.core.config import TransformerConfig
from attention_viz.core.device import resolve_device
from attention_viz.core.model import Transformer
from attention_viz.data.tokenizer import VOCAB_SIZE

WEIGHTS_SUFFIX, CARD_SUFFIX = ".safetensors", ".json"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # no dots, no slashes: a name is never a path


# What the trainer's card keeps in "settings" (TrainSettings) -> the config fields it decides.
SETTINGS_IN_CONFIG = {"d_model": ("d_model",), "n_heads": ("n_heads",), "d_k": ("d_k",), "d_v": ("d_v",),
                      "d_ff": ("d_ff",), "dropout": ("dropout",), "n_layers": ("n_encoder_layers", "n_decoder_layers")}
SETTINGS_COPIED_IN_CARD = ("task", "scale", "max_len", "seed", "steps")  # also at the card's top level


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded as it is: damaged weights, a card that is not a JSON object or contradicts
    itself or the weights. The message names the file."""


class UnsafeCheckpointError(CheckpointError):
    """A file that is not safetensors (for example a pickle, which can run code when loaded)."""


def shipped_models_dir() -> Path:
    """The folder of shipped checkpoints: attention_viz/data/models, installed with the package."""
    return Path(__file__).resolve().parent / "models"


def save_checkpoint(model: Transformer, card: dict, path: str | Path, dtype: torch.dtype | None = None) -> Path:
    """Write `path`.safetensors and `path`.json (the card, with the model's config and size filled in).

    dtype: store the weights in this floating type (e.g. torch.float16, half the bytes; the card's
    "weights_dtype" says so); they load back into a float32 model. None keeps the model's own.
    """
    stem = _stem(Path(path))
    stem.parent.mkdir(parents=True, exist_ok=True)
    tensors = unique_tensors(model)
    if dtype is not None:
        tensors = {name: t.to(dtype) if t.is_floating_point() else t for name, t in tensors.items()}
    stored = sorted({str(t.dtype).removeprefix("torch.") for t in tensors.values()})
    card = {**card, "name": stem.name, "config": model.config.to_dict(), "n_params": count_parameters(model),
            "weights_dtype": stored[0] if len(stored) == 1 else stored}
    weights, card_path = _file(stem, WEIGHTS_SUFFIX), _file(stem, CARD_SUFFIX)
    partial = _file(stem, ".partial")  # written first, then renamed: a reader never sees half a file
    save_file(tensors, str(partial), metadata={"format": "pt"})  # one key: the same bytes every time
    os.replace(partial, weights)
    partial.write_text(json.dumps(card, indent=1) + "\n")
    os.replace(partial, card_path)
    return weights


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> tuple[Transformer, dict]:
    """Load (model in eval mode, card) from NAME, NAME.safetensors or NAME.json.

    The model is float32 whatever the stored type (a float16 checkpoint is widened on load).

    Raises:
        UnsafeCheckpointError: the weights are not a safetensors file (pickles are refused, never opened).
        CheckpointError: the weights are empty, truncated or corrupt; the card is not a JSON object, its config
            does not build, contradicts its settings or does not describe the weights.
    """
    stem = _stem(Path(path))
    weights, card_path = _file(stem, WEIGHTS_SUFFIX), _file(stem, CARD_SUFFIX)
    check_safetensors(weights)
    card = {**read_card(card_path), "name": stem.name}
    model = Transformer(card_config(card, card_path))
    try:
        load_safetensors_into(model, str(weights), strict=True)
    except SafetensorError as error:
        raise CheckpointError(f"{weights} is corrupt or truncated: {error}") from error
    except RuntimeError as error:
        raise CheckpointError(f"{weights} does not match the config in {card_path}: {error}") from error
    if "n_params" in card and card["n_params"] != count_parameters(model):
        raise CheckpointError(f"{card_path} says n_params={card['n_params']!r}; the weights hold "
                              f"{count_parameters(model)}")
    return model.to(resolve_device(device)).eval(), card


def read_card(card_path: Path) -> dict:
    """The JSON object in `card_path`; CheckpointError, naming the file, for anything else."""
    try:
        card = json.loads(card_path.read_text())
    except ValueError as error:  # invalid JSON, or bytes that are not UTF-8
        raise CheckpointError(f"{card_path} is not valid JSON: {error}") from error
    if not isinstance(card, dict):
        raise CheckpointError(f"{card_path} does not hold a JSON object (it holds a {type(card).__name__})")
    return card


def card_config(card: dict, card_path: Path) -> TransformerConfig:
    """The card's TransformerConfig, checked against the card's own "settings" when the trainer wrote them."""
    try:
        config = TransformerConfig(**card["config"])
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{card_path} does not hold a valid TransformerConfig: {error!r}") from error
    settings = card.get("settings")
    if settings is None:
        return config
    if not isinstance(settings, dict):
        raise CheckpointError(f"{card_path}: its settings are not a JSON object")
    differing = [f"config {field}={getattr(config, field)!r} but settings {name}={settings[name]!r}"
                 for name, fields in SETTINGS_IN_CONFIG.items() if name in settings
                 for field in fields if getattr(config, field) != settings[name]]
    differing += [f"{name}={card[name]!r} but settings {name}={settings[name]!r}"
                  for name in SETTINGS_COPIED_IN_CARD if name in card and name in settings and card[name] != settings[name]]
    if config.vocab_size != VOCAB_SIZE:  # the trainer's models read the character tokenizer's ids
        differing.append(f"config vocab_size={config.vocab_size!r} but the trainer's tokenizer has {VOCAB_SIZE}")
    if differing:
        raise CheckpointError(f"{card_path} contradicts its own settings: {'; '.join(differing)}")
    return config


def check_safetensors(path: Path) -> None:
    """Raise UnsafeCheckpointError unless `path` starts like a safetensors file (8-byte header size, then JSON),
    CheckpointError if it is empty or shorter than its header says."""
    with open(path, "rb") as file:
        head = file.read(9)
    size = path.stat().st_size
    if size == 0:
        raise CheckpointError(f"{path} is empty")
    if len(head) == 9 and head[8:9] == b"{" and struct.unpack("<Q", head[:8])[0] > size - 8:
        raise CheckpointError(f"{path} is truncated: its header alone should be "
                              f"{struct.unpack('<Q', head[:8])[0]} bytes, the file has {size} in all")
    if len(head) < 9 or head[8:9] != b"{":
        raise UnsafeCheckpointError(
            f"{path} is not a safetensors file; only safetensors checkpoints are loaded, "
            "because pickled checkpoints (.pt, .pth, .bin) can execute code when opened"
        )


def list_models(directory: str | Path | None = None) -> list[dict]:
    """The cards of every checkpoint in `directory` (default: the shipped models), sorted by name.

    A JSON file without weights beside it is not a checkpoint and is skipped; a checkpoint's card that is not a
    JSON object, or whose config does not build or contradicts its settings, raises CheckpointError."""
    folder = Path(directory) if directory is not None else shipped_models_dir()
    cards = []
    for card_path in sorted(folder.glob("*" + CARD_SUFFIX)):
        if not _file(card_path.with_suffix(""), WEIGHTS_SUFFIX).exists():
            continue  # a JSON file without weights is not a model
        card = read_card(card_path)
        if "config" in card:
            card_config(card, card_path)  # a contradicting card is refused here too, not only when loaded
            cards.append({**card, "name": card_path.stem})
    return cards


def load_model(
    name: str, device: str | torch.device = "auto", directory: str | Path | None = None
) -> tuple[Transformer, dict]:
    """Load a registered checkpoint by name (e.g. "reverse"); "auto" puts it on CUDA when present."""
    folder = (Path(directory) if directory is not None else shipped_models_dir()).resolve()
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"invalid model name {name!r}: use letters, digits, '_' and '-', no path parts")
    stem = folder / name
    if stem.parent != folder or not _file(stem, WEIGHTS_SUFFIX).is_file():
        known = ", ".join(card["name"] for card in list_models(folder)) or "none"
        raise ValueError(f"no model named {name!r} in {folder} (known: {known})")
    return load_checkpoint(stem, device)


def unique_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each tied tensor kept once, under its alphabetically first name (safetensors' choice)."""
    state, seen = {}, set()
    for name, tensor in sorted(model.state_dict().items()):
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            state[name] = tensor.contiguous()
    return state


def count_parameters(model: torch.nn.Module) -> int:
    """Number of distinct trainable numbers (a tied embedding counts once)."""
    return sum(p.numel() for p in model.parameters())


def _file(stem: Path, suffix: str) -> Path:
    """NAME + suffix, keeping any dots inside NAME."""
    return stem.parent / (stem.name + suffix)


def _stem(path: Path) -> Path:
    """NAME from NAME, NAME.safetensors or NAME.json; other suffixes (.pt, .bin, ...) are refused."""
    if path.suffix in (WEIGHTS_SUFFIX, CARD_SUFFIX):
        return path.with_suffix("")
    if path.suffix in (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle"):
        raise UnsafeCheckpointError(
            f"{path}: pickled checkpoints are refused because they can execute code; convert it to safetensors"
        )
    return path
