"""The real models a server is set up with (attention_viz.hub): named by the server, loaded once, shared.

The set-up names Hub ids or local folders (`ATTENTION_VIZ_HUB_MODELS="Helsinki-NLP/opus-mt-en-de"`, or the
`names` argument); the picker offers exactly those, as "hub:" + the name, and a visitor can never make the server
load anything else. On a Hugging Face Space (SPACE_ID set) with nothing named, the paper's own task is offered:
SPACE_DEFAULT (opus-mt-en-de, SmolLM2-135M, DINOv2-small and whisper-tiny), which the Space's front matter
preloads. Without the hub extra (transformers) the list is empty and
`missing_extra` says how to add it.

Locks, and why none can stall the server:
- `_lock` guards the three dicts (loaded, refused, loading) and nothing else: it is never held across a load, a
  download or a model's work. A loaded model is returned without taking it.
- A model is loaded once, on a thread of its own; every visitor who asks for it meanwhile, the first one too, waits
  for it at most LOAD_WAIT_S (its progress told), then hears that it is still loading. A load that fails is
  remembered as refused with its reason (fast the second time); one that failed for the network is tried again
  after RETRY_AFTER_S.
- `line(key)` is a model's run line: one piece of that model's work at a time (two models run side by side, so a
  small encoder never waits behind a translation). It is a leaf: nothing is taken while it is held (whatever a run
  needs, heads' means included, is computed before), it refuses to be taken twice by one thread (a RuntimeError,
  never a wait on itself), and a wait for it ends after BUSY_WAIT_S with a message.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from attention_viz.service.checks import shown
from attention_viz.service.limits import HUB_MODELS_ENV, HUB_PREFIX, REAL_DEVICE_ENV, WARM_REAL_ENV

logger = logging.getLogger(__name__)

EXTRA = 'pip install "attention_viz[hub]" (transformers and sentencepiece)'
# A Space's real models when none is named (its front matter preloads them): the paper's own task, a small trained
# decoder that reads a page (8,192 positions; the Long text tab), a small trained ViT-class image encoder (DINOv2-small,
# 22 M parameters, Apache-2.0: its class token's attention finds the objects) and Whisper's smallest (39 M, Apache-2.0)
# for the Pictures and sound tab
SPACE_DEFAULT = ("Helsinki-NLP/opus-mt-en-de", "HuggingFaceTB/SmolLM2-135M", "facebook/dinov2-small",
                 "openai/whisper-tiny")
LOAD_WAIT_S = 60.0       # a visitor waits this long for a model being loaded, then hears it is still loading
RETRY_AFTER_S = 60.0     # a model that could not be downloaded is tried again after this long
BUSY_WAIT_S = 120.0      # a wait for a real model's run line ends with a message after this long


def warms_real_steps(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the server computes the lesson's real steps at start (WARM_REAL_ENV "1" or "0"; unset: on a Hugging
    Face Space, SPACE_ID set, whose front matter preloads the models those steps load)."""
    value = environ.get(WARM_REAL_ENV, "").strip()
    if value in ("0", "1"):
        return value == "1"
    if value:
        raise ValueError(f"{WARM_REAL_ENV} must be 1 or 0, got {value!r}")
    return bool(environ.get("SPACE_ID"))


def configured(names: Sequence[str] | str | None = None) -> list[str]:
    """The real models a server is set up with: `names`, else the environment's HUB_MODELS_ENV (comma-separated),
    else, on a Hugging Face Space (SPACE_ID set), SPACE_DEFAULT."""
    if names is None:
        names = os.environ.get(HUB_MODELS_ENV)
        if names is None and os.environ.get("SPACE_ID"):
            names = SPACE_DEFAULT
        names = names or ""
    if isinstance(names, str):
        names = names.split(",")
    return list(dict.fromkeys(name.strip() for name in names if name and name.strip()))


def real_device(device: str | None = None, environ: Mapping[str, str] = os.environ) -> str:
    """Where the server's real models run: `device`, else the operator's REAL_DEVICE_ENV, else "auto" (a GPU where
    the server has one, else the CPU), as a device name; a device that is not here is refused at start."""
    from attention_viz.core.device import resolve_device

    asked = device if device is not None else (environ.get(REAL_DEVICE_ENV, "").strip() or "auto")
    try:
        return str(resolve_device(asked))
    except ValueError as error:  # a GPU asked for where there is none
        raise ValueError(f"{REAL_DEVICE_ENV}: {error}; set it to auto or cpu") from None
    except RuntimeError:  # not a device's name
        raise ValueError(f"{REAL_DEVICE_ENV}={asked!r} is not a device; set it to auto, cpu, cuda or cuda:N") from None


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
    writes_text: bool = True    # what it can do besides its maps (attention_viz.hub's Abilities): write text, ...
    fills_masks: bool = False   # ... or fill its mask token (an encoder with its masked-LM head)
    fidelity: str = ""          # its proof on load, one line (attention_viz.hub's Fidelity: "proven on load: ...")
    name: str = ""              # what the picker calls it ("all-MiniLM-L6-v2"), in sentences that name the model
    scaling_note: str = ""      # where its own factor on QKᵀ is 1 (T5): what it does instead of 1/√d_k, in a sentence
    position_bias: bool = False  # it adds a position bias to QKᵀ (T5, ALiBi): the position_bias switch acts

    @property
    def d_v(self) -> int:
        return self.d_k


class RunLine:
    """One real model's work at a time: a lock that is a leaf. Taken twice by one thread it raises RuntimeError
    instead of waiting on itself; a wait for it ends after `wait_s` with a ValueError for the visitor."""

    def __init__(self, wait_s: float = BUSY_WAIT_S) -> None:
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._holder: int | None = None

    def __enter__(self) -> RunLine:
        if self._holder == threading.get_ident():
            raise RuntimeError("a real model's run line was taken twice by one thread (a lock order bug)")
        if not self._lock.acquire(timeout=self.wait_s):
            raise ValueError(f"This real model is busy with other visitors' work (over {self.wait_s:.0f} s): "
                             "try again in a minute. The other models answer as before.")
        self._holder = threading.get_ident()
        return self

    def __exit__(self, *exc) -> None:
        self._holder = None
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()


@dataclass
class _Loading:
    """A load under way: its result when done, and how far it got (for the visitors who wait)."""

    future: concurrent.futures.Future
    heard: list[tuple[float, str]] = field(default_factory=list)  # (fraction, text), in order; appended only

    @property
    def progress(self) -> str:
        return self.heard[-1][1] if self.heard else ""


class RealModels:
    """The real models of one server, by picker value ("hub:" + name); thread-safe, each loaded once."""

    def __init__(self, names: Sequence[str] | str | None = None, device: str | None = None,
                 load_wait_s: float = LOAD_WAIT_S, retry_after_s: float = RETRY_AFTER_S) -> None:
        # picker name -> what to load: a Hub id as it is, a local folder by its own name (no server path on the page)
        self.names = display_names(configured(names)) if hub_installed() else {}
        self.missing_extra = bool(configured(names)) and not hub_installed()
        self.device = real_device(device)
        self.load_wait_s, self.retry_after_s = load_wait_s, retry_after_s
        self._models: dict[str, object] = {}
        self._errors: dict[str, tuple[str, float | None]] = {}  # key -> (message, when it may be tried again)
        self._loading: dict[str, _Loading] = {}
        self._lock = threading.Lock()
        self._lines = {key: RunLine() for key in self.keys}  # picker value -> that model's run line
        self._reads: dict[str, str] = {}  # picker value -> what its config says it reads (reads)
        if self.missing_extra:
            logger.warning("real models %s were asked for, but the hub extra is not installed: %s",
                           configured(names), EXTRA)

    @property
    def keys(self) -> list[str]:
        """The picker values, in set-up order."""
        return [HUB_PREFIX + name for name in self.names]

    def line(self, key: str) -> RunLine:
        """The run line of the model `key` ("hub:" + name, one of keys)."""
        return self._lines[key]

    def label(self, key: str) -> str:
        """What the picker shows for a real model."""
        return f"{key[len(HUB_PREFIX):] if key.startswith(HUB_PREFIX) else key} (real model)"

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.startswith(HUB_PREFIX) and key[len(HUB_PREFIX):] in self.names

    def loaded(self, key: str) -> bool:
        return key in self._models

    def states(self) -> dict[str, str]:
        """Each real model's state by the name the page shows: "loaded", "loading", "refused" or "loads on first
        use"."""
        with self._lock:
            return {name: "loaded" if key in self._models else "loading" if key in self._loading
                    else "refused" if key in self._errors else "loads on first use"
                    for name, key in ((name, HUB_PREFIX + name) for name in self.names)}

    def one_stack(self, key: str) -> bool:
        """False where the model's config, read from its folder or the cache (never fetched, nothing loaded), says it
        is an encoder-decoder (a translation model: it reads a page with its encoder); True otherwise, unknown too."""
        return self.stacks(key) != 2

    def stacks(self, key: str) -> int | None:
        """How many stacks the model's config says it has (1, or 2 for an encoder-decoder), read from its folder or
        the cache, never fetched, nothing loaded; None where it cannot be read so (not cached: it may be refused)."""
        from attention_viz.hub.loading import stacks  # the hub extra: installed wherever a real model is set up

        return stacks(self.names[display_name(key)])

    def reads(self, key: str) -> str | None:
        """What the model `key` reads by its config, read from its folder or the cache (hub.loading.reads: "text",
        "pictures" or "recordings"), nothing loaded; None where it cannot be read so (it is offered as a text model,
        and loading it says what it is)."""
        known = self._reads.get(key)
        if known is None:
            from attention_viz.hub.loading import reads  # the hub extra, as in stacks

            known = reads(self.names[display_name(key)])
            if known is not None:
                self._reads[key] = known  # a config read once is kept; an unknown one is asked again
        return known

    @property
    def text_keys(self) -> list[str]:
        """The models that read text (or whose config cannot be read before loading), in set-up order."""
        return [key for key in self.keys if self.reads(key) in ("text", None)]

    @property
    def media_keys(self) -> list[str]:
        """The models that read pictures or recordings (their configs say so), in set-up order."""
        return [key for key in self.keys if self.reads(key) in ("pictures", "recordings")]

    def get(self, key: str, progress: Callable[[float, str], None] | None = None):
        """The wrapped model (attention_viz.hub.PretrainedTransformer) for a picker value, loaded on first use;
        progress(fraction, text) hears how a download goes, on the caller's thread.

        Raises ValueError with a message for the visitor when it is not set up here, cannot be loaded, or is still
        loading after LOAD_WAIT_S."""
        if key not in self:
            raise ValueError(f"Unknown model {shown(key)}.")
        model = self._models.get(key)
        if model is not None:
            return model
        with self._lock:
            if key in self._models:
                return self._models[key]
            if key in self._errors:
                message, retry_at = self._errors[key]
                if retry_at is None or time.monotonic() < retry_at:
                    raise ValueError(message)
                del self._errors[key]
            loading = self._loading.get(key)
            if loading is None:
                loading = self._loading[key] = _Loading(concurrent.futures.Future())
                threading.Thread(target=self._load_into, args=(key, loading), name=f"load {key}", daemon=True).start()
        return self._wait(key, loading, progress)

    def _wait(self, key: str, loading: _Loading, progress) -> object:
        """The loaded model, or a ValueError: its refusal, or that it is still loading after load_wait_s."""
        deadline = time.monotonic() + self.load_wait_s
        told = 0
        while True:
            concurrent.futures.wait([loading.future], timeout=max(0.0, min(0.1, deadline - time.monotonic())))
            if progress is not None:
                for fraction, text in loading.heard[told:]:  # the load's progress, told on the caller's thread
                    progress(fraction, text)
                    told += 1
            if loading.future.done():
                return loading.future.result()  # the model, or its refusal (a ValueError)
            if time.monotonic() >= deadline:
                doing = f" ({loading.progress})" if loading.progress else ""
                raise ValueError(f"The model {display_name(key)!r} is still loading{doing}: try again in a "
                                 "minute. The other models work as before.")

    def _load_into(self, key: str, loading: _Loading) -> None:
        """Load one model (on its own thread, holding no lock) and file it as loaded or refused."""
        name = display_name(key)

        try:
            model = self._load(self.names[name], lambda fraction, text: loading.heard.append((fraction, text)))
        except Exception as error:  # noqa: BLE001 - whatever a folder or the network raises is a refusal
            message, transient = refusal(name, error)
            if message_of(error) or isinstance(error, ImportError):
                logger.error("loading real model %r failed: %s", key, error)
            else:  # not a refusal the loader knows: the trace is for the operator, the visitor gets the reason
                logger.exception("loading real model %r failed", key)
            with self._lock:
                self._errors[key] = (message, time.monotonic() + self.retry_after_s if transient else None)
                del self._loading[key]
            loading.future.set_exception(ValueError(message))
            return
        model.name = name  # what the picker calls it, in every sentence that names it (before anyone shares it)
        with self._lock:
            self._models[key] = model
            del self._loading[key]
        loading.future.set_result(model)

    def _load(self, name: str, progress=None):
        from attention_viz.hub import fetch, load_pretrained  # the hub extra: imported only when a real model is used

        return load_pretrained(fetch(name, progress), device=self.device)

    def shape(self, key: str, progress=None) -> RealShape:
        """The loaded model's layers, heads and widths (loading it first if need be, telling `progress`)."""
        model = self.get(key, progress)
        return RealShape(model.family.name, model.layout, model.n_layers("encoder.self_attn"),
                         model.n_layers("decoder.self_attn"), model.n_heads, model.d_k, model.d_model,
                         model.family.about, tuple(model.kinds), sink_token(model.tokenizer),
                         model.abilities.writes_text, model.abilities.fills_masks, str(model.fidelity),
                         display_name(key), model.scaling_note, model.abilities.position_bias)


def sink_token(tokenizer) -> str:
    """The end token as the tokenizer writes it ("</s>", "[SEP]", "<|endoftext|>"), "" when it has none."""
    return str(getattr(tokenizer, "eos_token", None) or getattr(tokenizer, "sep_token", None) or "")


def display_name(name: str) -> str:
    """A real model's name as the page shows it: the Hub id, or a local folder's own name (never a server path)."""
    name = name[len(HUB_PREFIX):] if name.startswith(HUB_PREFIX) else name
    path = Path(name).expanduser()
    return path.name if path.is_absolute() or name.startswith((".", "~")) or path.is_dir() else name


def display_names(names: Sequence[str]) -> dict[str, str]:
    """Picker name -> what to load, in set-up order; two set-ups with one name (two folders called "bert") are
    both offered, the later ones told apart by their place: "bert", "bert (2)"."""
    out: dict[str, str] = {}
    for name in dict.fromkeys(names):
        shown_as = base = display_name(name)
        n = 1
        while shown_as in out:
            n += 1
            shown_as = f"{base} ({n})"
        out[shown_as] = name
    return out


def message_of(error: Exception) -> str | None:
    """The loader's own refusal (attention_viz.hub.ModelRefusedError, whose text is written for a visitor: the
    model's name, what is wrong, never a server path), or None for any other exception."""
    if importlib.util.find_spec("transformers") is None:
        return None
    from attention_viz.hub import ModelRefusedError

    return str(error) if isinstance(error, ModelRefusedError) else None


def refusal(name: str, error: Exception) -> tuple[str, bool]:
    """The visitor's message for a model that could not be loaded (the loader's own reason, else what kind of fault
    it was; no server path), and whether the cause may pass (the network) so that it is worth trying again later."""
    transient = type(error).__name__ == "ModelUnavailableError"
    tail = " The other models work as before."
    if message_of(error):
        return str(error).rstrip() + tail, transient
    if isinstance(error, ImportError):
        return f"Real models need the hub extra: {EXTRA}.", False
    return f"The model {name!r} could not be loaded on this server ({type(error).__name__})." + tail, False
