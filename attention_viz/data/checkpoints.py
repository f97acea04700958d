"""Checkpoints: safetensors weights plus a JSON card, loaded only through formats that cannot run code.

A checkpoint named NAME is two files side by side:
    NAME.safetensors   the weights (tensors only; no pickle, so loading it cannot execute anything)
    NAME.json          the card: {"name", "task", "scale", "config", "max_len", "alphabet", "seed", "steps",
                       "wall_time_s", "heldout_exact_match", "heldout_size", "n_params", "curve", ...}
The card's "scale" ("sqrt_dk" or "none") is how the model was trained, and the mode it should be run in.
The registry is the shipped folder `attention_viz/data/models` (package data); a name never reaches a path outside it.
"""

from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path

import torch
from safetensors.torch import load_model as load_safetensors_into
from safetensors.torch import save_file

from attention_viz.core.config import TransformerConfig
from attention_viz.core.device import resolve_device
from attention_viz.core.model import Transformer

WEIGHTS_SUFFIX, CARD_SUFFIX = ".safetensors", ".json"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # no dots, no slashes: a name is never a path


class UnsafeCheckpointError(ValueError):
    """A file that is not safetensors (for example a pickle, which can run code when loaded)."""


def shipped_models_dir() -> Path:
    """The folder of shipped checkpoints: attention_viz/data/models, installed with the package."""
    return Path(__file__).resolve().parent / "models"


def save_checkpoint(model: Transformer, card: dict, path: str | Path) -> Path:
    """Write `path`.safetensors and `path`.json (the card, with the model's config and size filled in)."""
    stem = _stem(Path(path))
    stem.parent.mkdir(parents=True, exist_ok=True)
    card = {**card, "name": stem.name, "config": model.config.to_dict(), "n_params": count_parameters(model)}
    weights, card_path = _file(stem, WEIGHTS_SUFFIX), _file(stem, CARD_SUFFIX)
    partial = _file(stem, ".partial")  # written first, then renamed: a reader never sees half a file
    save_file(unique_tensors(model), str(partial), metadata={"format": "pt"})  # one key: the same bytes every time
    os.replace(partial, weights)
    partial.write_text(json.dumps(card, indent=1) + "\n")
    os.replace(partial, card_path)
    return weights


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> tuple[Transformer, dict]:
    """Load (model in eval mode, card) from NAME, NAME.safetensors or NAME.json.

    Raises:
        UnsafeCheckpointError: the weights are not a safetensors file (pickles are refused, never opened).
        ValueError: the card's config does not describe the weights.
    """
    stem = _stem(Path(path))
    weights, card_path = _file(stem, WEIGHTS_SUFFIX), _file(stem, CARD_SUFFIX)
    check_safetensors(weights)
    card = {**json.loads(card_path.read_text()), "name": stem.name}
    try:
        config = TransformerConfig(**card["config"])
    except (KeyError, TypeError) as error:
        raise ValueError(f"{card_path} does not hold a valid TransformerConfig: {error}") from error
    model = Transformer(config)
    try:
        load_safetensors_into(model, str(weights), strict=True)
    except RuntimeError as error:
        raise ValueError(f"{weights} does not match the config in {card_path}: {error}") from error
    return model.to(resolve_device(device)).eval(), card


def check_safetensors(path: Path) -> None:
    """Raise UnsafeCheckpointError unless `path` starts like a safetensors file (8-byte header size, then JSON)."""
    with open(path, "rb") as file:
        head = file.read(9)
    size = path.stat().st_size
    if len(head) < 9 or head[8:9] != b"{" or struct.unpack("<Q", head[:8])[0] > size - 8:
        raise UnsafeCheckpointError(
            f"{path} is not a safetensors file; only safetensors checkpoints are loaded, "
            "because pickled checkpoints (.pt, .pth, .bin) can execute code when opened"
        )


def list_models(directory: str | Path | None = None) -> list[dict]:
    """The cards of every checkpoint in `directory` (default: the shipped models), sorted by name."""
    folder = Path(directory) if directory is not None else shipped_models_dir()
    cards = []
    for card_path in sorted(folder.glob("*" + CARD_SUFFIX)):
        card = json.loads(card_path.read_text())
        if "config" in card and _file(card_path.with_suffix(""), WEIGHTS_SUFFIX).exists():
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
