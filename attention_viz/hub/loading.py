"""Loading a real model safely: safetensors weights only, never remote code, offline when the Hub is off.

A pickle (`pytorch_model.bin`, `.pt`, `.ckpt`) can run code when it is opened, so a folder or Hub repository
that has only pickled weights is refused before anything is read. `trust_remote_code` is always False: a
repository's own Python never runs. With `HF_HUB_OFFLINE=1` (or `local_files_only=True`) nothing is downloaded;
a model that is not in the local cache then gets a message that says so.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
)

from attention_viz.core.device import resolve_device
from attention_viz.hub.attention import IMPLEMENTATION
from attention_viz.hub.families import family_of
from attention_viz.hub.model import PretrainedTransformer

PICKLED = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")
# What a download fetches from a Hub repository: configs, safetensors weights and tokenizer files, never a pickle.
FETCHED = ["*.json", "*.safetensors", "*.spm", "*.model", "*.txt", "*.tiktoken"]


class UnsafeWeightsError(ValueError):
    """Weights that are not safetensors (a pickle can run code when opened): refused, never read."""


class ModelUnavailableError(OSError):
    """A model that is neither a local folder nor in the Hugging Face cache, and could not be downloaded."""


def offline() -> bool:
    """True when the Hub is switched off for this process (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)."""
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def check_folder(path: Path) -> None:
    """Refuse a local model folder whose weights are pickled only; FileNotFoundError when it holds no weights."""
    if any(path.glob("*.safetensors")):
        return
    pickled = sorted(p.name for pattern in PICKLED for p in path.glob(pattern))
    if pickled:
        raise UnsafeWeightsError(f"{path.name}: its weights are pickled ({', '.join(pickled[:3])}), which can run "
                                 "code when opened; attention_viz loads safetensors only. Convert them once, where "
                                 "you trust them, with `model.save_pretrained(folder, safe_serialization=True)`.")
    raise FileNotFoundError(f"{path.name} holds no weights (*.safetensors).")


def fetch(name: str, progress=None) -> str:
    """A Hub id downloaded into the local cache (what is already there is not fetched again), reporting
    progress(fraction, text) file by file; returns its local folder. A folder, or with the Hub off: `name` as it is.

    Raises ModelUnavailableError when it cannot be downloaded."""
    if Path(name).expanduser().is_dir() or offline():
        return name
    from huggingface_hub import snapshot_download
    from tqdm.auto import tqdm

    from attention_viz.hub.network import bounded

    bounded()  # connect and read timeouts: a Hub that never answers refuses the model instead of stalling it

    class Reported(tqdm):
        """tqdm that tells `progress` how many of the repository's files are in."""

        def update(self, n=1):
            done = super().update(n)
            if progress is not None and self.total:
                progress(self.n / self.total, f"Downloading {name}: {self.n} of {self.total} files")
            return done

    try:
        return snapshot_download(name, allow_patterns=FETCHED, tqdm_class=Reported)
    except Exception as error:  # noqa: BLE001 - any failure of the Hub or the network: the model is not available
        why = " (the Hub did not answer in time)" if timed_out(error) else ""
        raise ModelUnavailableError(f"The model {name!r} could not be downloaded{why}.") from error


def timed_out(error: BaseException | None) -> bool:
    """True when `error`, or an error it was raised from, is a timeout."""
    while error is not None:
        if isinstance(error, TimeoutError) or "Timeout" in type(error).__name__:
            return True
        error = error.__cause__ or error.__context__
    return False


def model_class(config):
    """The transformers Auto class that gives this config's model its output head."""
    layout = family_of(config).layout
    if layout == "encoder-decoder":
        return AutoModelForSeq2SeqLM
    if layout == "decoder":
        return AutoModelForCausalLM
    architectures = getattr(config, "architectures", None) or []
    if any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in architectures):
        return AutoModelForMaskedLM
    return AutoModel


def load_pretrained(
    name_or_path: str | Path,
    *,
    device: str | torch.device = "auto",
    dtype: torch.dtype = torch.float32,
    local_files_only: bool | None = None,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
) -> PretrainedTransformer:
    """A Hub id ("Helsinki-NLP/opus-mt-en-de") or a local folder, loaded with its tokenizer and wrapped.

    Args:
        device: "auto" (CUDA when present), "cpu", "cuda", ...
        dtype: the weights' dtype (float32 by default; float64 for exact references).
        local_files_only: never download (default: whether the Hub is switched off for this process).

    Raises:
        UnsafeWeightsError: the weights are pickled only.
        UnsupportedModelError: a family whose attention cannot go through our Eq. 1 (the message says why).
        ModelUnavailableError: not a folder, not cached, and not downloadable from here.
    """
    local_only = offline() if local_files_only is None else bool(local_files_only)
    path = Path(name_or_path).expanduser()
    source = str(path) if path.is_dir() else str(name_or_path)
    if path.is_dir():
        check_folder(path)
    options = {"trust_remote_code": False, "local_files_only": local_only, "revision": revision,
               "cache_dir": str(cache_dir) if cache_dir is not None else None}
    try:
        config = AutoConfig.from_pretrained(source, **options)
        family_of(config)  # refuse an unsupported family before any weight is read
        model = model_class(config).from_pretrained(source, config=config, use_safetensors=True, dtype=dtype,
                                                    attn_implementation=IMPLEMENTATION, **options)
        tokenizer = AutoTokenizer.from_pretrained(source, **options)
    except OSError as error:
        text = str(error)
        if "safetensors" in text and ("pytorch_model.bin" in text or "does not appear to have" in text):
            raise UnsafeWeightsError(f"{name_or_path}: no safetensors weights (a pickle is never opened).") from None
        where = "the Hub is switched off here" if local_only else "it could not be downloaded"
        raise ModelUnavailableError(f"The model {str(name_or_path)!r} is not in this machine's Hugging Face cache "
                                    f"and {where}.") from error
    return PretrainedTransformer(model.to(resolve_device(device)), tokenizer, name=str(name_or_path))
