"""One user's run: text + model + switches -> every attention map, cached, with every input validated.

An `Explorer` is created once when the app starts. It lists the trained models (grouped into d_k
families), builds untrained models on demand, and caches each run keyed by the settings that change
the computation, so a control that only changes the view (kind, layer, head, colour scale) never
reruns the model. Every public entry point validates its inputs and raises ValueError with a message
meant for the user; the app shows that message as it is.

Axes: L layers, H heads, Q query positions, K key positions.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from attention_viz.core.attention import MultiHeadAttention, Scale, attention_steps, scale_factor
from attention_viz.data.checkpoints import UnsafeCheckpointError, list_models, load_model
from attention_viz.core.config import TransformerConfig
from attention_viz.service.checks import check_bool, check_choice, check_float, check_int, check_text
from attention_viz.core.maps import KINDS, head_statistics
from attention_viz.core.model import Transformer
from attention_viz.fast.attention import scaled_dot_product_attention as fast_attention
from attention_viz.data.tasks import target
from attention_viz.data.tokenizer import DEFAULT_MAX_LEN, CharTokenizer

logger = logging.getLogger(__name__)

UNTRAINED = "untrained"
SCALE_MODES = {"sqrt_dk": "1/√d_k (paper)", "none": "off (plain q·k)", "custom": "custom factor"}
COMPARISONS = {
    "scaling": ("scaled by 1/√d_k", "unscaled"),
    "causal_mask": ("causal mask on", "causal mask off"),
    "padding_mask": ("padding mask on", "padding mask off"),
}
STAT_HEADERS = ["layer", "head", "entropy (nats)", "max weight", "mean distance", "on diagonal"]

# Ranges of the numeric inputs (inclusive).
D_K_RANGE = (1, 1024)
D_MODEL_RANGE = (8, 512)
HEADS_RANGE = (1, 16)
MAX_HEAD_WIDTH = 4096          # untrained model: h·d_k at most this, so W_Q and W_K stay small (<= 8 MiB each)
PAD_TOKENS_RANGE = (0, 16)
FACTOR_RANGE = (1e-3, 100.0)   # custom scale factor
UNTRAINED_LAYERS = 2           # N of the untrained model, encoder and decoder
UNTRAINED_SEED = 0
EXTRA_DECODE_STEPS = 4         # a trained model may run on past the source length by this many tokens before we stop it
DEFAULT_UNTRAINED = {"d_model": 64, "n_heads": 4, "d_k": 16}
# Untrained models kept for reuse, by total parameter bytes: the default is ~0.5 MB, the largest (d_model 512,
# h·d_k 4096) ~110 MB, which is built again when needed rather than held.
UNTRAINED_CACHE_BYTES = 32 * 2**20


# ----------------------------------------------------------------------------- models


@dataclass(frozen=True)
class ModelFamily:
    """Trained checkpoints of one task and training scale that differ in d_k: the d_k slider moves through them."""

    key: str                               # "reverse/sqrt_dk": the model picker's value
    task: str
    scale: str                             # how the family was trained: "sqrt_dk" or "none"
    members: tuple[tuple[int, str], ...]   # (d_k, checkpoint name), by increasing d_k

    @property
    def label(self) -> str:
        """What the model picker shows."""
        how = "trained with 1/√d_k" if self.scale == "sqrt_dk" else "trained without scaling"
        return f"{self.task} ({how})"

    @property
    def d_ks(self) -> list[int]:
        """The trained key widths, increasing."""
        return [d_k for d_k, _ in self.members]

    def nearest(self, d_k: int) -> tuple[int, str]:
        """(d_k, checkpoint name) of the member nearest d_k on a log scale (ties go to the smaller)."""
        return min(self.members, key=lambda member: (abs(math.log2(member[0] / d_k)), member[0]))


def model_families(cards: Sequence[dict]) -> list[ModelFamily]:
    """Group checkpoint cards by (task, scale), the paper's scaling first; one member per d_k (the first name wins)."""
    groups: dict[tuple[str, str], dict[int, str]] = {}
    for card in sorted(cards, key=lambda c: c["name"]):
        task, scale = card.get("task", "model"), card.get("scale", "sqrt_dk")
        groups.setdefault((task, scale), {}).setdefault(int(card["config"]["d_k"]), card["name"])
    return [
        ModelFamily(f"{task}/{scale}", task, scale, tuple(sorted(members.items())))
        for (task, scale), members in sorted(groups.items(), key=lambda item: (item[0][1] != "sqrt_dk", item[0]))
    ]


def build_untrained(d_model: int, n_heads: int, d_k: int, vocab_size: int) -> Transformer:
    """A randomly initialised model (fixed seed, N=2, d_v = d_model // h, d_ff = 4·d_model) in eval mode."""
    config = TransformerConfig(
        vocab_size=vocab_size, n_encoder_layers=UNTRAINED_LAYERS, n_decoder_layers=UNTRAINED_LAYERS,
        d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=max(1, d_model // n_heads), d_ff=4 * d_model, dropout=0.0,
    )
    with torch.random.fork_rng(devices=[]):  # leaves the global generator as it was
        torch.manual_seed(UNTRAINED_SEED)
        return Transformer(config).eval()


# ----------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class Settings:
    """Everything that changes the computation; hashable, so it keys the run cache."""

    text: str
    model: str                 # a family key ("reverse/sqrt_dk") or "untrained"
    checkpoint: str | None     # the family member used, None for the untrained model
    d_k: int                   # resolved: a trained member's d_k, or the untrained model's
    scale: Scale               # "sqrt_dk", "none" or a positive factor
    causal_mask: bool
    padding_mask: bool
    pad_tokens: int            # <pad> tokens appended to the source
    d_model: int               # the model's width and heads (from the card for a trained model)
    n_heads: int


@dataclass(frozen=True)
class Run:
    """The result of one forward pass: tokens, output string and every map as [H, Q, K] numpy arrays."""

    settings: Settings
    config: TransformerConfig
    card: dict | None = field(repr=False, hash=False, compare=False)
    src_ids: tuple[int, ...]               # text + <eos> + pads
    tgt_ids: tuple[int, ...]               # the decoder input of the last step: <bos> + output[:-1]
    src_tokens: tuple[str, ...]
    tgt_tokens: tuple[str, ...]
    generated: tuple[str, ...]             # the greedy output tokens, <eos> included when emitted
    output: str                            # the generated text, up to <eos>
    finished: bool                         # <eos> was emitted
    expected: str | None                   # what the trained task asks for, None when untrained
    maps: dict[str, np.ndarray] = field(repr=False, hash=False, compare=False)  # key -> [H, Q, K], read-only

    @property
    def trained(self) -> bool:
        return self.card is not None

    def n_layers(self, kind: str) -> int:
        """Number of layers that have attention of this kind."""
        kind = check_choice("attention kind", kind, KINDS)
        return self.config.n_encoder_layers if kind.startswith("encoder") else self.config.n_decoder_layers

    def weights(self, kind: str) -> np.ndarray:
        """Every layer of one kind stacked: [L, H, Q, K]."""
        kind = check_choice("attention kind", kind, KINDS)
        stack, name = kind.split(".")
        return np.stack([self.maps[f"{stack}.{i}.{name}"] for i in range(self.n_layers(kind))])

    def head(self, kind: str, layer: object, head: object) -> np.ndarray:
        """One head's weights [Q, K], with layer and head checked against this model."""
        kind = check_choice("attention kind", kind, KINDS)
        layer = check_int("layer", layer, 0, self.n_layers(kind) - 1)
        head = check_int("head", head, 0, self.config.n_heads - 1)
        stack, name = kind.split(".")
        return self.maps[f"{stack}.{layer}.{name}"][head]

    def tokens(self, kind: str) -> tuple[list[str], list[str]]:
        """(query tokens, key tokens) of one kind: the axes of its heatmaps."""
        kind = check_choice("attention kind", kind, KINDS)
        queries = self.src_tokens if kind == "encoder.self_attn" else self.tgt_tokens
        keys = self.tgt_tokens if kind == "decoder.self_attn" else self.src_tokens
        return list(queries), list(keys)

    def mask(self, kind: str) -> np.ndarray:
        """[Q, K] bool in the package's convention, True = may attend; False cells were masked (drawn grey)."""
        kind = check_choice("attention kind", kind, KINDS)
        queries, keys = self.tokens(kind)
        allowed = np.ones((len(queries), len(keys)), dtype=bool)
        if self.settings.padding_mask:
            allowed &= np.array([token != "<pad>" for token in keys])[None, :]
        if kind == "decoder.self_attn" and self.settings.causal_mask:
            allowed &= np.tril(np.ones_like(allowed))
        return allowed

    def statistics(self, kind: str) -> list[list[float]]:
        """One row per (layer, head) of this kind, columns as STAT_HEADERS (maps.head_statistics)."""
        stats = head_statistics(self.weights(kind))  # each [L, H]
        n_layers, n_heads = stats["entropy"].shape
        return [
            [layer, head] + [round(float(stats[name][layer, head]), 4)
                             for name in ("entropy", "max_weight", "mean_distance", "diagonal")]
            for layer in range(n_layers) for head in range(n_heads)
        ]


@dataclass(frozen=True)
class Steps:
    """Figure 2 (left) for one head: QKᵀ, scaled, masked, softmax weights [Q, K] and weights·V [Q, d_v]."""

    arrays: dict[str, np.ndarray]
    query_tokens: list[str]
    key_tokens: list[str]
    factor: float               # what QKᵀ was multiplied by


@dataclass(frozen=True)
class Comparison:
    """One head under two settings that differ in one switch, on the same input (teacher-forced decoder)."""

    what: str
    labels: tuple[str, str]
    a: np.ndarray               # [Q, K]
    b: np.ndarray               # [Q, K]
    query_tokens: list[str]
    key_tokens: list[str]
    outputs: tuple[str, str]    # the free-running greedy outputs under each setting

    @property
    def difference(self) -> np.ndarray:
        return self.a - self.b


# ----------------------------------------------------------------------------- the explorer


def parameter_bytes(model: torch.nn.Module) -> int:
    """Bytes held by a model's parameters."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


class SizedCache:
    """build(*key), memoised for the most recently used keys while their values total at most max_bytes.

    A value larger than max_bytes on its own is returned but not kept. Thread-safe; builds run one at a time.
    """

    def __init__(self, build, max_bytes: int, size_of) -> None:
        self._build, self.max_bytes, self._size_of = build, max_bytes, size_of
        self._kept: OrderedDict[tuple, tuple[object, int]] = OrderedDict()  # key -> (value, bytes), oldest first
        self._bytes = 0  # the sum of the kept values' bytes
        self._lock = threading.Lock()

    def __call__(self, *key):
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key][0]
            value = self._build(*key)
            size = self._size_of(value)
            if size <= self.max_bytes:
                self._kept[key] = (value, size)
                self._bytes += size
                while self._bytes > self.max_bytes:
                    self._bytes -= self._kept.popitem(last=False)[1][1]
            return value

    @property
    def bytes(self) -> int:
        """Bytes kept now."""
        with self._lock:
            return self._bytes


class Explorer:
    """Models, validation and a cache of runs for the app: one per server, safe to share between users.

    Args:
        models_dir: folder of checkpoints (default: the shipped attention_viz/data/models).
        device: where models run; the app uses the CPU.
        run_cache_size: runs kept (each holds every map of one input: ~0.1 MB for the trained models, up to
            ~0.5 MB for the widest untrained one).
    """

    def __init__(self, models_dir: str | Path | None = None, device: str = "cpu", run_cache_size: int = 64) -> None:
        self.tokenizer = CharTokenizer(max_len=DEFAULT_MAX_LEN)
        self.models_dir = models_dir
        self.device = torch.device(device)
        self.cards = {card["name"]: card for card in list_models(models_dir)}
        self.families = {family.key: family for family in model_families(list(self.cards.values()))}
        self._build_lock = threading.Lock()
        self._checkpoint = functools.lru_cache(maxsize=None)(self._load_checkpoint)
        self._untrained = SizedCache(self._build_untrained, UNTRAINED_CACHE_BYTES, parameter_bytes)
        self.run = functools.lru_cache(maxsize=run_cache_size)(self._run)

    # -- choices

    @property
    def model_choices(self) -> list[tuple[str, str]]:
        """(label, value) pairs for the model picker: every trained family, then the untrained model."""
        return [(f.label, f.key) for f in self.families.values()] + [("untrained (random weights)", UNTRAINED)]

    @property
    def default_model(self) -> str:
        """The model the app opens with: reverse trained with 1/√d_k when shipped, else the first family."""
        if "reverse/sqrt_dk" in self.families:
            return "reverse/sqrt_dk"
        return next(iter(self.families), UNTRAINED)

    def d_k_choices(self, model: str) -> list[int]:
        """The trained d_k values of a family, or [] for the untrained model (free d_k)."""
        model = self._check_model(model)
        return [] if model == UNTRAINED else self.families[model].d_ks

    def default_d_k(self, model: str) -> int:
        """The d_k a model opens with: the family member nearest 16, or 16 for the untrained model."""
        model = self._check_model(model)
        if model == UNTRAINED:
            return DEFAULT_UNTRAINED["d_k"]
        return self.families[model].nearest(DEFAULT_UNTRAINED["d_k"])[0]

    def model_shape(self, model: str, d_k: object = None) -> TransformerConfig | None:
        """The config of a trained family member (nearest d_k), None for the untrained model."""
        model = self._check_model(model)
        if model == UNTRAINED:
            return None
        d_k = self.default_d_k(model) if d_k is None else check_int("d_k", d_k, *D_K_RANGE)
        name = self.families[model].nearest(d_k)[1]
        return TransformerConfig(**self.cards[name]["config"])

    def _check_model(self, model: object) -> str:
        if model == UNTRAINED or (isinstance(model, str) and model in self.families):
            return model
        known = ", ".join(repr(value) for _, value in self.model_choices)
        raise ValueError(f"Unknown model {model!r}; choose one of {known}.")

    # -- settings

    def settings(
        self,
        text: object,
        model: object,
        d_k: object,
        scale_mode: object = "sqrt_dk",
        custom_factor: object = 1.0,
        causal_mask: object = True,
        padding_mask: object = True,
        pad_tokens: object = 0,
        d_model: object = DEFAULT_UNTRAINED["d_model"],
        n_heads: object = DEFAULT_UNTRAINED["n_heads"],
    ) -> Settings:
        """Validate raw control values into Settings; a trained family's d_k snaps to its nearest member.

        Raises:
            ValueError: with a message for the user, naming the input and its allowed values.
        """
        text = check_text(text, self.tokenizer.max_len)
        model = self._check_model(model)
        d_k = check_int("d_k", d_k, *D_K_RANGE)
        mode = check_choice("scaling", scale_mode, SCALE_MODES)
        factor = check_float("custom scale factor", custom_factor, *FACTOR_RANGE)
        causal_mask = check_bool("causal mask", causal_mask)
        padding_mask = check_bool("padding mask", padding_mask)
        pad_tokens = check_int("pad tokens", pad_tokens, *PAD_TOKENS_RANGE)
        d_model = check_int("d_model", d_model, *D_MODEL_RANGE)
        n_heads = check_int("heads", n_heads, *HEADS_RANGE)
        checkpoint = None
        if model == UNTRAINED:
            if n_heads * d_k > MAX_HEAD_WIDTH:
                raise ValueError(
                    f"heads × d_k is {n_heads} × {d_k} = {n_heads * d_k}; the untrained model allows at most "
                    f"{MAX_HEAD_WIDTH}. Lower d_k or the number of heads."
                )
        else:
            d_k, checkpoint = self.families[model].nearest(d_k)
            config = self.cards[checkpoint]["config"]
            d_model, n_heads = config["d_model"], config["n_heads"]
        scale: Scale = factor if mode == "custom" else mode
        return Settings(text, model, checkpoint, d_k, scale, causal_mask, padding_mask, pad_tokens, d_model, n_heads)

    # -- models

    def _load_checkpoint(self, name: str) -> tuple[Transformer, dict]:
        with self._build_lock:
            try:
                model, card = load_model(name, device=self.device, directory=self.models_dir)
                return model.use_kernel(fast_attention), card
            except (OSError, ValueError) as error:  # the full reason, with server paths, goes to the log only
                logger.error("loading checkpoint %r failed: %s", name, error)
                if isinstance(error, UnsafeCheckpointError):
                    raise UnsafeCheckpointError(
                        f"The model {name!r} was refused: its weights are not a safetensors file."
                    ) from None
                raise ValueError(f"The model {name!r} could not be loaded; its checkpoint may be damaged.") from None

    def _build_untrained(self, d_model: int, n_heads: int, d_k: int) -> Transformer:
        with self._build_lock:  # fork_rng touches the global generator: one build at a time (SizedCache also serialises)
            model = build_untrained(d_model, n_heads, d_k, self.tokenizer.vocab_size).to(self.device)
            return model.use_kernel(fast_attention)  # the app runs the bit-identical fast Eq. 1

    def model(self, settings: Settings) -> tuple[Transformer, dict | None]:
        """The model (eval mode, shared: never mutate it) and its card (None when untrained)."""
        if settings.checkpoint is None:
            return self._untrained(settings.d_model, settings.n_heads, settings.d_k), None
        return self._checkpoint(settings.checkpoint)

    # -- runs

    def _run(self, settings: Settings) -> Run:
        """Greedy-decode the text and keep the maps of the last step (cached by `run`)."""
        model, card = self.model(settings)
        tok = self.tokenizer
        src_ids = tok.encode(settings.text).ids + [tok.pad_id] * settings.pad_tokens
        src = torch.tensor([src_ids], device=self.device)  # (1, S)
        # The tasks' answers are as long as the text; a trained model may overrun a little (shown as unfinished),
        # an untrained one never emits <eos>, so it decodes exactly as many tokens as the source has.
        max_len = len(settings.text) + 1 + (EXTRA_DECODE_STEPS if card is not None else 0)
        with torch.inference_mode():
            generated, maps = model.greedy_decode(
                src, max_len=max_len, bos_id=tok.bos_id, eos_id=tok.eos_id, scale=settings.scale,
                causal_mask=settings.causal_mask, padding_mask=settings.padding_mask,
            )
        out_ids = generated[0].tolist()
        tgt_ids = [tok.bos_id] + out_ids[:-1]  # the decoder input whose maps greedy_decode returned
        arrays = {}
        for key, value in maps.to_numpy().items():
            array = value[0]  # (H, Q, K)
            array.setflags(write=False)  # shared between users through the cache
            arrays[key] = array
        return Run(
            settings=settings, config=model.config, card=card,
            src_ids=tuple(src_ids), tgt_ids=tuple(tgt_ids),
            src_tokens=tuple(tok.tokens(src_ids)), tgt_tokens=tuple(tok.tokens(tgt_ids)),
            generated=tuple(tok.tokens(out_ids)), output=tok.decode(out_ids), finished=tok.eos_id in out_ids,
            expected=target(card["task"], settings.text) if card and "task" in card else None,
            maps=arrays,
        )

    def teacher_forced_maps(self, run: Run, settings: Settings) -> dict[str, np.ndarray]:
        """Maps [H, Q, K] of one forward pass on `run`'s source and decoder input under other `settings`."""
        model, _ = self.model(settings)
        src = torch.tensor([run.src_ids], device=self.device)  # (1, S)
        tgt = torch.tensor([run.tgt_ids], device=self.device)  # (1, T)
        with torch.inference_mode():
            _, maps = model(src, tgt, scale=settings.scale, causal_mask=settings.causal_mask,
                            padding_mask=settings.padding_mask)
        return {key: value[0] for key, value in maps.to_numpy().items()}

    def steps(self, settings: Settings, kind: object, layer: object, head: object) -> Steps:
        """Every intermediate of Eq. 1 for one head (Figure 2, left), recomputed from that layer's inputs."""
        run = self.run(settings)
        kind = check_choice("attention kind", kind, KINDS)
        run.head(kind, layer, head)  # validates layer and head
        layer, head = int(layer), int(head)
        model, _ = self.model(settings)
        module = attention_module(model, kind, layer)
        captured: dict[str, tuple] = {}
        thread = threading.get_ident()

        def capture(_module, args, kwargs):  # the model is shared: keep only this thread's call
            if threading.get_ident() == thread:
                captured["args"] = args
                captured["kwargs"] = kwargs

        handle = module.register_forward_pre_hook(capture, with_kwargs=True)
        try:
            src = torch.tensor([run.src_ids], device=self.device)  # (1, S)
            tgt = torch.tensor([run.tgt_ids], device=self.device)  # (1, T)
            with torch.inference_mode():
                model(src, tgt, scale=settings.scale, causal_mask=settings.causal_mask,
                      padding_mask=settings.padding_mask)
                query, key, value, mask, scale = _attention_call(captured["args"], captured["kwargs"])
                q, k, v = module.project(query, key, value)  # (1, H, Q, d_k), (1, H, K, d_k), (1, H, K, d_v)
                head_mask = None
                if mask is not None:
                    head_mask = torch.broadcast_to(mask, (1, module.n_heads, q.size(2), k.size(2)))[0, head]
                intermediates = attention_steps(q[0, head], k[0, head], v[0, head], head_mask, scale)
        finally:
            handle.remove()
        queries, keys = run.tokens(kind)
        arrays = {name: t.float().cpu().numpy() for name, t in intermediates.items()}
        return Steps(arrays, queries, keys, scale_factor(settings.scale, settings.d_k))

    def compare(self, settings: Settings, what: object, kind: object, layer: object, head: object) -> Comparison:
        """One head with a switch on (a) and off (b), on the same source and decoder input."""
        what = check_choice("comparison", what, {key: key.replace("_", " ") for key in COMPARISONS})
        run = self.run(settings)
        run.head(kind, layer, head)  # validates kind, layer and head
        if what == "scaling":
            a, b = replace(settings, scale="sqrt_dk"), replace(settings, scale="none")
        else:
            a, b = replace(settings, **{what: True}), replace(settings, **{what: False})
        kind = check_choice("attention kind", kind, KINDS)
        stack, name = kind.split(".")
        key = f"{stack}.{int(layer)}.{name}"
        weights_a = self.teacher_forced_maps(run, a)[key][int(head)]
        weights_b = self.teacher_forced_maps(run, b)[key][int(head)]
        queries, keys = run.tokens(kind)
        outputs = (self.run(a).output, self.run(b).output)
        return Comparison(what, COMPARISONS[what], weights_a, weights_b, queries, keys, outputs)

    # -- exports

    def maps_npz(self, run: Run) -> bytes:
        """Every map of a run as .npz: one [H, Q, K] float32 array per key, the tokens, and the settings as JSON."""
        buffer = io.BytesIO()
        settings = dict(run.settings.__dict__)
        np.savez_compressed(
            buffer,
            **{key: np.asarray(value) for key, value in run.maps.items()},
            src_tokens=np.array(run.src_tokens, dtype=str),
            tgt_tokens=np.array(run.tgt_tokens, dtype=str),
            settings=np.array(json.dumps(settings, ensure_ascii=False)),
        )
        return buffer.getvalue()

    def head_csv(self, run: Run, kind: object, layer: object, head: object) -> str:
        """One head as CSV: a header of keys, then one row per query; labels are "position:token"."""
        weights = run.head(kind, layer, head)
        queries, keys = run.tokens(kind)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["query \\ key"] + [f"{j}:{token}" for j, token in enumerate(keys)])
        for i, (token, row) in enumerate(zip(queries, weights, strict=True)):
            writer.writerow([f"{i}:{token}"] + [f"{w:.6f}" for w in row])
        return out.getvalue()


def attention_module(model: Transformer, kind: str, layer: int) -> MultiHeadAttention:
    """The MultiHeadAttention module behind a map key's kind and layer."""
    stack, name = kind.split(".")
    layers = model.encoder.layers if stack == "encoder" else model.decoder.layers
    return getattr(layers[layer], name)


def _attention_call(args: tuple, kwargs: dict) -> tuple:
    """(query, key, value, mask, scale) from a MultiHeadAttention call's arguments."""
    names = ("query", "key", "value", "mask", "scale")
    defaults = {"mask": None, "scale": "sqrt_dk"}
    bound = dict(zip(names, args, strict=False)) | kwargs  # args may stop early
    return tuple(bound.get(name, defaults.get(name)) for name in names)
