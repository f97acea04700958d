"""Loading a real model safely: safetensors weights only, never remote code, offline when the Hub is off, and every
bad folder refused with its true reason.

A folder or Hub repository that has only pickled weights is refused before anything is read (hub.checks: a pickle
can run code when it is opened). `trust_remote_code` is always False: a repository's own Python never runs. With
`HF_HUB_OFFLINE=1` (or `local_files_only=True`) nothing is downloaded; a model that is not in the local cache then
gets a message that says so.

Everything load_pretrained refuses is a ModelRefusedError whose message is a sentence for a web visitor: the model
named by its folder's own name or Hub id, and what is wrong with it. A folder is checked before transformers reads
it and after (hub.checks); whatever transformers still raises on a bad folder is turned into a refusal.
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
from attention_viz.hub import images, speech
from attention_viz.hub.attention import IMPLEMENTATION
from attention_viz.hub.checks import (
    check_folder,
    check_model,
    check_tokenizer,
    detail,
    lacking_tokenizer_files,
    refused,
    shown_name,
)
from attention_viz.hub.routes import built_under
from attention_viz.hub.families import ModelRefusedError, UnsupportedModelError, family_of
from attention_viz.hub.model import PretrainedTransformer

# What a download fetches from a Hub repository: configs, safetensors weights and tokenizer files, never a pickle.
FETCHED = ["*.json", "*.safetensors", "*.spm", "*.model", "*.txt", "*.tiktoken"]


class ModelUnavailableError(ModelRefusedError, OSError):
    """A model that is neither a local folder nor in the Hugging Face cache, and could not be downloaded."""


def offline() -> bool:
    """True when the Hub is switched off for this process (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)."""
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


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
        raise ModelUnavailableError(f"The model {name!r} is not in this machine's Hugging Face cache and could not be "
                                    f"downloaded{why}.") from error


def timed_out(error: BaseException | None) -> bool:
    """True when `error`, or an error it was raised from, is a timeout."""
    while error is not None:
        if isinstance(error, TimeoutError) or "Timeout" in type(error).__name__:
            return True
        error = error.__cause__ or error.__context__
    return False


def model_class(config):
    """The transformers Auto class that builds this config's model with the output head its checkpoint was saved
    with: the class its config's architectures name, found in transformers' own mappings (a sequence-to-sequence LM,
    a causal LM, a masked LM, else the base model, with no head: `BertModel` as the sentence-embedding models are
    saved, `GPT2Model`, and under a head of another task); with no architectures named, the first of those mappings
    that holds its model type (an encoder's masked LM before a causal LM)."""
    from transformers.models.auto import modeling_auto as auto

    choices = ((AutoModelForSeq2SeqLM, auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES),
               (AutoModelForCausalLM, auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
               (AutoModelForMaskedLM, auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES),
               (AutoModel, auto.MODEL_MAPPING_NAMES))
    model_type = config.model_type
    architectures = set(getattr(config, "architectures", None) or [])
    for auto_class, names in choices:
        if names.get(model_type) in architectures:
            return auto_class
    masked = model_type in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    if any(a.endswith("ForPreTraining") for a in architectures) and masked:
        return AutoModelForMaskedLM  # its pre-training heads hold the masked LM's
    if architectures:
        return AutoModel  # a head of another task (a classifier): the base model under it
    if getattr(config, "is_encoder_decoder", False) and model_type in auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForSeq2SeqLM
    if masked:
        return AutoModelForMaskedLM  # an encoder (BERT, RoBERTa), though it may have a causal LM class too
    if model_type in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForCausalLM
    return AutoModel


def load_pretrained(
    name_or_path: str | Path,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    device_map: str | dict | None = None,
    offload_folder: str | Path | None = None,
    local_files_only: bool | None = None,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
) -> PretrainedTransformer:
    """A Hub id ("Helsinki-NLP/opus-mt-en-de") or a local folder, loaded with its tokenizer and wrapped.

    Args:
        device: "auto" (CUDA when present; the default), "cpu", "cuda", ... (the whole model on one device; not
            with a device_map, which says where everything goes).
        dtype: the weights' dtype (float32 by default; float64 for exact references; bfloat16 or float16 to halve
            the memory).
        device_map: placement by accelerate, as transformers' from_pretrained takes it: "auto" (GPUs, then the
            CPU, then disk), "balanced", "sequential", or {module name: "cpu" | "disk" | "cuda:0" | 0}
            ({"": "cpu"} is the whole model). Checked before any weight is read (hub.placement).
        offload_folder: where the layers a device map puts on "disk" are kept.
        local_files_only: never download (default: whether the Hub is switched off for this process).

    Raises:
        ModelRefusedError: for everything a bad folder can hold (a corrupt or missing file, weights that do not fit
            the config, a tokenizer that does not fit the model); its message names the model and what is wrong.
            Of its kinds: UnsafeWeightsError (the weights are pickled only), UnsupportedModelError (a family whose
            attention cannot go through our Eq. 1), ModelUnavailableError (not a folder, not cached, and not
            downloadable from here). A placement that cannot be (a device that is not here, a module the model
            does not have, an offload folder that cannot be written, a dtype a device cannot run, weights that do
            not fit where they are to go, a device beside a device map) is refused too, before any weight is read.
    """
    local_only = offline() if local_files_only is None else bool(local_files_only)
    path = Path(name_or_path).expanduser()
    shown = shown_name(name_or_path)
    folder = path if path.is_dir() else snapshot(str(name_or_path), local_only, revision, cache_dir)
    check_folder(folder, shown)
    options = {"trust_remote_code": False, "local_files_only": True}
    step = "its config.json does not describe a model that can be built"
    try:
        config = AutoConfig.from_pretrained(folder, **options)
        if images.vision_config(config) is not None or speech.is_speech(config):
            step = "its model could not be built from its config.json, weights and preprocessor_config.json"
            return _load_modality(folder, config, shown, device, dtype, device_map, offload_folder, options)
        family_of(config)  # refuse an unsupported configuration before any weight is read
        placement = placed(device, device_map, offload_folder, dtype, model_class(config), config, shown, folder)
        step = "its model could not be built from its config.json and weights"
        model, loading = model_class(config).from_pretrained(
            folder, config=config, use_safetensors=True, dtype=dtype,
            attn_implementation=built_under(config, IMPLEMENTATION), output_loading_info=True,
            ignore_mismatched_sizes=True, **placement, **options)
        check_model(model, loading, shown)
        step = "its tokenizer could not be built from its files"
        tokenizer = AutoTokenizer.from_pretrained(folder, **options)
        check_tokenizer(model, tokenizer, shown)
        step = f"it could not be wrapped and placed on {device or 'auto'}"
        model = model if device_map is not None else model.to(resolve_device(device or "auto"))
        return PretrainedTransformer(model, tokenizer, name=shown)
    except UnsupportedModelError as error:  # the family's own reason (family_of, the wrapper): named here
        raise refused(shown, str(error), UnsupportedModelError) from None
    except ModelRefusedError:
        raise
    except Exception as error:  # noqa: BLE001 - whatever transformers raises on a bad folder: refused with the reason
        lacking = lacking_tokenizer_files(folder) if step.startswith("its tokenizer") else ""
        raise refused(shown, lacking or f"{step} ({type(error).__name__}: {detail(error, folder, shown)})") from error


def _load_modality(folder: Path, config, shown: str, device, dtype, device_map, offload_folder, options: dict
                   ) -> PretrainedTransformer:
    """A model that reads pictures (a vision encoder, a two-tower model's vision tower) or sound (Whisper), with what
    makes its input (the image processor, the feature extractor) and, for speech, the tokenizer it writes with."""
    from transformers import AutoFeatureExtractor, AutoImageProcessor, AutoModelForSpeechSeq2Seq

    tokenizer = None
    if speech.is_speech(config):
        own, auto_class = config, AutoModelForSpeechSeq2Seq
    else:
        own, auto_class = images.vision_config(config), images.model_class(config)
    family_of(own)
    placement = placed(device, device_map, offload_folder, dtype, auto_class, own, shown, folder)
    model, loading = auto_class.from_pretrained(
        folder, config=own, use_safetensors=True, dtype=dtype, attn_implementation=built_under(own, IMPLEMENTATION),
        output_loading_info=True, ignore_mismatched_sizes=True, **placement, **options)
    check_model(model, loading, shown)
    if speech.is_speech(config):
        modality = speech.Frames.of(config, AutoFeatureExtractor.from_pretrained(folder, **options))
        tokenizer = AutoTokenizer.from_pretrained(folder, **options)
        check_tokenizer(model, tokenizer, shown)
    else:
        modality = images.Patches.of(own, AutoImageProcessor.from_pretrained(folder, **options))
    model = model if device_map is not None else model.to(resolve_device(device or "auto"))
    return PretrainedTransformer(model, tokenizer, name=shown, modality=modality)


def placed(device, device_map, offload_folder, dtype, auto_class, config, shown: str, folder: Path) -> dict:
    """from_pretrained's placement arguments, each checked before any weight is read (hub.placement); a placement
    that cannot be is refused with what to change. No device map: none (the model is moved to `device` whole, its
    weights' bytes, from its safetensors headers, within the device's free memory)."""
    from attention_viz.hub import placement

    if device_map is not None and device is not None:
        raise refused(shown, f"it was given both device={device!r} and a device_map; give one of them (a device_map "
                             "says where every layer goes; device_map={'': " f"{str(device)!r}" "} puts the whole "
                             "model on one device)")
    if device_map is None:
        try:
            where = resolve_device(device or "auto")
            placement.check_dtype(dtype, [where])
            if where.type in ("cpu", "cuda"):  # the places accelerate sizes
                size = placement.header_bytes(sorted(folder.glob("*.safetensors")), dtype)
                free = placement.room().get("cpu" if where.type == "cpu" else where.index or 0, size)
                if size > free:
                    raise ValueError(f"its weights are {placement.shown_bytes(size)} in "
                                     f"{str(dtype).removeprefix('torch.')}, and {where} has "
                                     f"{placement.shown_bytes(free)} free; load it with device_map='auto' and an "
                                     "offload_folder (the layers beyond memory read from disk), or in a smaller "
                                     "dtype")
        except ValueError as error:
            raise refused(shown, str(error)) from None
        return {}
    try:
        device_map = placement.check_placement(device_map, offload_folder, dtype, auto_class, config)
    except ImportError:
        raise refused(shown, "placing it with a device_map needs accelerate (pip install accelerate)") from None
    except ValueError as error:
        raise refused(shown, str(error)) from None
    return {"device_map": device_map, "offload_folder": str(offload_folder) if offload_folder is not None else None}


def snapshot(name: str, local_only: bool, revision: str | None, cache_dir: str | Path | None) -> Path:
    """The local folder of a Hub id: its snapshot in the Hugging Face cache (downloaded first unless local_only)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, revision=revision, allow_patterns=FETCHED, local_files_only=local_only,
                                      cache_dir=str(cache_dir) if cache_dir is not None else None))
    except Exception as error:  # noqa: BLE001 - not cached, or the Hub or the network failed: not available
        where = "the Hub is switched off here" if local_only else "it could not be downloaded"
        raise ModelUnavailableError(f"The model {name!r} is not in this machine's Hugging Face cache and "
                                    f"{where}.") from error


def one_stack(name: str) -> bool:
    """False where the config of `name` (a Hub id or a folder), read from the folder or the cache and never fetched,
    says it is an encoder-decoder model; True otherwise, and where it cannot be read (loading it will say why)."""
    return stacks(name) != 2


def stacks(name: str) -> int | None:
    """How many stacks the config of `name` says the model has (2: an encoder-decoder model, else 1), read from the
    folder or the cache and never fetched; None where it cannot be read (not cached, not a model)."""
    config = cached_config(name)
    return None if config is None else 2 if getattr(config, "is_encoder_decoder", False) else 1


def reads(name: str) -> str | None:
    """What the model of `name` reads, by its config read as `stacks` reads it: "pictures" (an image model),
    "recordings" (a speech model) or "text"; None where its config cannot be read so."""
    config = cached_config(name)
    if config is None:
        return None
    return "pictures" if images.vision_config(config) is not None else "recordings" if speech.is_speech(config) \
        else "text"


def cached_config(name: str):
    """The config of `name` from its folder or the cache, never fetched; None where it cannot be read so."""
    try:
        return AutoConfig.from_pretrained(name, local_files_only=True)
    except Exception:  # noqa: BLE001 - not cached, not a model: unknown
        return None
