"""The real models a server is set up with (attention_viz.hub): named by the server, loaded once, shared.

The set-up names Hub ids or local folders (`ATTENTION_VIZ_HUB_MODELS="Helsinki-NLP/opus-mt-en-de"`, or the
`names` argument); the picker offers exactly those, as "hub:" + the name, and a visitor can never make the server
load anything else. Each model is loaded the first time it is asked for (a ~300 MB model once per process, under a
lock, so two visitors never load it twice) and kept. Without the hub extra (transformers) the list is empty and
`missing_extra` says how to add it. A model that cannot be loaded (not cached and no network, pickled weights, an
unsupported family) is refused with the reason, and the rest of the app works as before.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attention_viz.service.checks import shown
from attention_viz.service.limits import HUB_MODELS_ENV, HUB_PREFIX

logger = logging.getLogger(__name__)

EXTRA = 'pip install "attention_viz[hub]" (transformers and sentencepiece)'


def configured(names: Sequence[str] | str | None = None) -> list[str]:
    """The real models a server is set up with: `names`, else the environment's HUB_MODELS_ENV (comma-separated)."""
    if names is None:
        names = os.environ.get(HUB_MODELS_ENV, "")
    if isinstance(names, str):
        names = names.split(",")
    return list(dict.fromkeys(name.strip() for name in names if name and name.strip()))


def hub_installed() -> bool:
    """True when the hub extra (transformers) is importable."""
    try:
        return importlib.util.find_spec("transformers") is not None
    except (ImportError, ValueError):  # blocked, or a module without a spec
        return False


@dataclass(frozen=True)
class RealShape:
    """What the views need to know of a real model without touching it: layers per stack, heads, widths."""

    family: str                 # "Marian", "BERT", ...
    layout: str                 # "encoder-decoder", "encoder" or "decoder"
    n_encoder_layers: int       # 0 when the model has no encoder ...
    n_decoder_layers: int       # ... or no decoder
    n_heads: int
    d_k: int
    d_model: int
    about: str                  # the family's one line (norm placement, positions)
    kinds: tuple[str, ...]      # the kinds of attention it has (core.maps.KINDS keys)
    sink: str                   # its end token as its tokenizer writes it ("</s>", "[SEP]"): the sink pattern's key

    @property
    def d_v(self) -> int:
        return self.d_k


class RealModels:
    """The real models of one server, by picker value ("hub:" + name); thread-safe, each loaded once."""

    def __init__(self, names: Sequence[str] | str | None = None, device: str = "cpu") -> None:
        # picker name -> what to load: a Hub id as it is, a local folder by its own name (no server path on the page)
        self.names = {display_name(name): name for name in configured(names)} if hub_installed() else {}
        self.missing_extra = bool(configured(names)) and not hub_installed()
        self.device = device
        self._models: dict[str, object] = {}
        self._errors: dict[str, str] = {}
        self._lock = threading.Lock()
        # Held while a real model runs: one at a time on the server (a 74M-parameter decode takes a core for up to a
        # second), so the other run slots stay free for the small models (webui's RUN_SLOTS).
        self.busy = threading.Lock()
        if self.missing_extra:
            logger.warning("real models %s were asked for, but the hub extra is not installed: %s",
                           configured(names), EXTRA)

    @property
    def keys(self) -> list[str]:
        """The picker values, in set-up order."""
        return [HUB_PREFIX + name for name in self.names]

    def label(self, key: str) -> str:
        """What the picker shows for a real model."""
        return f"{display_name(key)} (real model)"

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.startswith(HUB_PREFIX) and key[len(HUB_PREFIX):] in self.names

    def loaded(self, key: str) -> bool:
        return key in self._models

    def states(self) -> dict[str, str]:
        """Each real model's state by the name the page shows: "loaded", "refused" or "loads on first use"."""
        return {name: "loaded" if key in self._models else "refused" if key in self._errors else "loads on first use"
                for name, key in ((name, HUB_PREFIX + name) for name in self.names)}

    def get(self, key: str, progress=None):
        """The wrapped model (attention_viz.hub.PretrainedTransformer) for a picker value, loaded on first use;
        progress(fraction, text) hears how a download goes.

        Raises ValueError with a message for the visitor when it is not set up here or cannot be loaded."""
        if key not in self:
            raise ValueError(f"Unknown model {shown(key)}.")
        with self._lock:
            if key in self._models:
                return self._models[key]
            if key in self._errors:
                raise ValueError(self._errors[key])
            try:
                model = self._load(self.names[key[len(HUB_PREFIX):]], progress)
            except (OSError, ValueError, ImportError) as error:
                message = refusal(display_name(key), error)
                logger.error("loading real model %r failed: %s", key, error)
                self._errors[key] = message
                raise ValueError(message) from None
            self._models[key] = model
            return model

    def _load(self, name: str, progress=None):
        from attention_viz.hub import fetch, load_pretrained  # the hub extra: imported only when a real model is used

        return load_pretrained(fetch(name, progress), device=self.device)

    def shape(self, key: str, progress=None) -> RealShape:
        """The loaded model's layers, heads and widths (loading it first if need be, telling `progress`)."""
        model = self.get(key, progress)
        return RealShape(model.family.name, model.layout, model.n_layers("encoder.self_attn"),
                         model.n_layers("decoder.self_attn"), model.n_heads, model.d_k, model.d_model,
                         model.family.about, tuple(model.kinds), sink_token(model.tokenizer))


def sink_token(tokenizer) -> str:
    """The end token as the tokenizer writes it ("</s>", "[SEP]", "<|endoftext|>"), "" when it has none."""
    return str(getattr(tokenizer, "eos_token", None) or getattr(tokenizer, "sep_token", None) or "")


def display_name(name: str) -> str:
    """A real model's name as the page shows it: the Hub id, or a local folder's own name (never a server path)."""
    name = name[len(HUB_PREFIX):] if name.startswith(HUB_PREFIX) else name
    path = Path(name).expanduser()
    return path.name if path.is_absolute() or name.startswith((".", "~")) or path.is_dir() else name


def refusal(name: str, error: Exception) -> str:
    """The visitor's message for a model that could not be loaded: the reason, without server paths."""
    kind = type(error).__name__
    if kind == "ModelUnavailableError":
        return (f"The model {name!r} is not available on this server: it is not in its Hugging Face cache and "
                "could not be downloaded. The other models work as before.")
    if kind == "UnsafeWeightsError":
        return f"The model {name!r} was refused: its weights are not safetensors (a pickle can run code)."
    if kind == "UnsupportedModelError":
        return f"The model {name!r} was refused: {error}"
    if isinstance(error, ImportError):
        return f"Real models need the hub extra: {EXTRA}."
    return f"The model {name!r} could not be loaded on this server."
