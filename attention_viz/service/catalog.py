"""The models the app can run: shipped checkpoints grouped into d_k families, untrained models built on demand.

Every picker entry answers for itself (service.models.Entry, handed out by Catalog.entry): its d_k values, shape,
controls, text rule, member and model: own_model's FamilyEntry and UntrainedEntry, hub_model's RealEntry.
Catalog.entries lists them in the picker's order, the one place that names the kinds; Catalog.entry finds the one a
model key names. The catalog keeps what they share: the cards, the tokenizer, the device, the caches and locks of our
models, the real models.

A family is the set of trained checkpoints of one task, training scale and compatibility function that differ in
d_k: the app's d_k control moves through its members. The compatibility study's members (the folder's study/,
docs/study.md) are families of their own, "study/scaled_dot", "study/dot" and "study/additive", never merged
with the shipped ones. Models are loaded once and shared between users (never
mutate them); they run Eq. 1 with attention_viz.fast's kernel, bit-identical to the core's reference (additive
attention has its own, in the core).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import threading
from collections import OrderedDict, namedtuple
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer
from attention_viz.data.checkpoints import UnsafeCheckpointError, list_models, load_model, shipped_models_dir
from attention_viz.data.snapshots import Snapshots, load_snapshots
from attention_viz.data.tokenizer import DEFAULT_MAX_LEN, CharTokenizer
from attention_viz.fast.attention import scaled_dot_product_attention as fast_attention
from attention_viz.service.checks import check_choice, shown
from attention_viz.service.hub_model import RealEntry
from attention_viz.service.models import Entry, HeadMeans, ModelControls, ServedModel
from attention_viz.service.own_model import FamilyEntry, OwnModel, UntrainedEntry
from attention_viz.service.requests import Member, Settings
from attention_viz.service.real_models import RealModels, RealShape
from attention_viz.service.limits import (
    COMPATIBILITY_LABEL,
    STUDY_ARMS,
    STUDY_LABELS,
    STUDY_PREFIX,
    UNTRAINED,
    UNTRAINED_CACHE_BYTES,
    UNTRAINED_LAYERS,
    UNTRAINED_SEED,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelFamily:
    """Trained checkpoints of one task, training scale and compatibility that differ in d_k: the d_k slider moves
    through them."""

    key: str                               # "reverse/sqrt_dk" ("reverse/additive" for additive attention): the picker's value
    task: str
    scale: str                             # how the family was trained: "sqrt_dk" or "none"
    members: tuple[tuple[int, str], ...]   # (d_k, checkpoint name), by increasing d_k
    compatibility: str = "dot_product"     # §3.2.1: "dot_product" (Eq. 1, scaled or not) or "additive"
    study: bool = False                    # a family of the compatibility study (key "study/<arm>")

    @property
    def arm(self) -> str:
        """The study's name for how it attends: "scaled_dot", "dot" or "additive" (a key of STUDY_ARMS)."""
        if self.compatibility == "additive":
            return "additive"
        return "scaled_dot" if self.scale == "sqrt_dk" else "dot"

    @property
    def label(self) -> str:
        """What the model picker shows."""
        if self.study:
            return STUDY_LABELS[self.arm]
        if self.compatibility == "additive":
            return f"{self.task} (additive attention)"
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
    """Group checkpoint cards by (task, scale, compatibility), the paper's scaling first, additive attention last;
    one member per d_k (the first name wins). Additive attention ignores the scale, so it is one family per task."""
    groups: dict[tuple[str, str, str], dict[int, str]] = {}
    for card in sorted(cards, key=lambda c: c["name"]):
        task, scale = card.get("task", "model"), card.get("scale", "sqrt_dk")
        compatibility = card["config"].get("compatibility", "dot_product")
        if compatibility == "additive":
            scale = "sqrt_dk"  # what the forward pass is given, and ignores
        groups.setdefault((task, scale, compatibility), {}).setdefault(int(card["config"]["d_k"]), card["name"])

    def order(item):
        (task, scale, compatibility), _ = item
        return compatibility != "dot_product", scale != "sqrt_dk", task

    return [
        ModelFamily(f"{task}/{scale if compatibility == 'dot_product' else compatibility}", task, scale,
                    tuple(sorted(members.items())), compatibility)
        for (task, scale, compatibility), members in sorted(groups.items(), key=order)
    ]


def study_families(cards: Sequence[dict]) -> list[ModelFamily]:
    """The compatibility study's members as one family per arm ("study/scaled_dot", "study/dot",
    "study/additive", in that order), whatever the task; one member per d_k (the first name wins)."""
    families = model_families(cards)
    by_arm = {family.arm: family for family in families}
    if len(by_arm) != len(families):
        raise ValueError("the study's folder holds more than one task or family per compatibility function")
    return [ModelFamily(STUDY_PREFIX + arm, f.task, f.scale, f.members, f.compatibility, study=True)
            for arm in STUDY_ARMS if (f := by_arm.get(arm))]


def longest_text(cards: Sequence[dict]) -> int:
    """The app's limit on a text, in characters: the longest max_len of the cards, and never under 20."""
    return max([DEFAULT_MAX_LEN, *(card["max_len"] for card in cards if isinstance(card.get("max_len"), int))])


def build_untrained(d_model: int, n_heads: int, d_k: int, vocab_size: int) -> Transformer:
    """A randomly initialised model (fixed seed, N=2, d_v = d_model // h, d_ff = 4·d_model) in eval mode."""
    config = TransformerConfig(
        vocab_size=vocab_size, n_encoder_layers=UNTRAINED_LAYERS, n_decoder_layers=UNTRAINED_LAYERS,
        d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=max(1, d_model // n_heads), d_ff=4 * d_model, dropout=0.0,
    )
    with torch.random.fork_rng(devices=[]):  # leaves the global generator as it was
        torch.manual_seed(UNTRAINED_SEED)
        return Transformer(config).eval()


def parameter_bytes(model: torch.nn.Module) -> int:
    """Bytes held by a model's parameters."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


CacheInfo = namedtuple("CacheInfo", "hits misses maxsize currsize")  # as functools.lru_cache's


class SizedCache:
    """build(*key), memoised for the most recently used keys while their values total at most max_bytes.

    A value larger than max_bytes on its own is returned but not kept. Thread-safe. serial: builds run one at a
    time (a model's build touches the global generator; two widths at once would double the memory); otherwise
    they run side by side, and two callers asking for the same new key at once may both build it.
    """

    def __init__(self, build, max_bytes: int, size_of, serial: bool = True) -> None:
        self._build, self.max_bytes, self._size_of = build, max_bytes, size_of
        self._kept: OrderedDict[tuple, tuple[object, int]] = OrderedDict()  # key -> (value, bytes), oldest first
        self._bytes = 0  # the sum of the kept values' bytes
        self._lock = threading.Lock()
        self._building = threading.Lock() if serial else contextlib.nullcontext()
        self._hits = self._misses = 0

    def __call__(self, *key):
        with self._building:
            with self._lock:
                if key in self._kept:
                    self._hits += 1
                    self._kept.move_to_end(key)
                    return self._kept[key][0]
                self._misses += 1
            value = self._build(*key)
            size = self._size_of(value)
            with self._lock:
                if size <= self.max_bytes and key not in self._kept:
                    self._kept[key] = (value, size)
                    self._bytes += size
                    while self._bytes > self.max_bytes:
                        self._bytes -= self._kept.popitem(last=False)[1][1]
            return value

    def kept(self, *key):
        """The value kept for key (counted as a hit, and now the most recently used), or None: nothing is built."""
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                return None
            self._hits += 1
            self._kept.move_to_end(key)
            return found[0]

    def cache_info(self) -> CacheInfo:
        """functools' statistics: hits, misses, maxsize (None: bounded by bytes), currsize (values kept)."""
        with self._lock:
            return CacheInfo(self._hits, self._misses, None, len(self._kept))

    @property
    def bytes(self) -> int:
        """Bytes kept now."""
        with self._lock:
            return self._bytes



class Catalog:
    """The models of one server: trained families from a checkpoint folder, untrained ones by size; thread-safe.

    Args:
        models_dir: folder of checkpoints (default: the shipped attention_viz/data/models); its subfolder study/,
            when there, holds the compatibility study's members (families "study/<arm>").
        device: where our models run; the app uses the CPU. Real models run where RealModels puts them (a GPU where
            the server has one, or the operator's ATTENTION_VIZ_DEVICE).
        hub_models: the real models this server offers (Hub ids or local folders; service.real_models), default
            the environment's ATTENTION_VIZ_HUB_MODELS; none without the hub extra.
    """

    def __init__(self, models_dir: str | Path | None = None, device: str = "cpu",
                 hub_models: Sequence[str] | str | None = None) -> None:
        self.models_dir = models_dir
        self.device = torch.device(device)
        top = Path(models_dir) if models_dir is not None else shipped_models_dir()
        study_dir = top / "study"
        shipped = list_models(top)
        study = list_models(study_dir) if study_dir.is_dir() else []
        self.tokenizer = CharTokenizer(max_len=longest_text(shipped + study))  # the app's limit on a text
        self.cards = {card["name"]: card for card in shipped}
        self._folders = {card["name"]: top for card in shipped}  # checkpoint name -> its folder
        for card in study:
            if card["name"] in self.cards:
                raise ValueError(f"the study's checkpoint {card['name']!r} has the name of a shipped one")
            self.cards[card["name"]], self._folders[card["name"]] = card, study_dir
        families = model_families(shipped) + study_families(study)
        self.families = {family.key: family for family in families}
        self._build_lock = threading.Lock()
        self._checkpoint = functools.lru_cache(maxsize=None)(self._load_checkpoint)
        self._snapshots = functools.lru_cache(maxsize=None)(self._read_snapshots)
        self._untrained = SizedCache(self._build_untrained, UNTRAINED_CACHE_BYTES, parameter_bytes)
        self.real = RealModels(hub_models)
        self._family_entries = [FamilyEntry(family, self.cards, self.tokenizer, self.device, self.trained)
                                for family in families]
        self._untrained_entry = UntrainedEntry(self.tokenizer, self.device, self.untrained)

    def readiness(self) -> dict:
        """What the server's readiness endpoint answers: the models it offers and each real model's state; no model
        work (the default model ran for the opening page before the server answered at all)."""
        return {"status": "ok", "families": len(self.families), "checkpoints": len(self.cards),
                "real_models": self.real.states()}

    @property
    def model_choices(self) -> list[tuple[str, str]]:
        """(label, value) pairs for the model picker: every trained family, the real models set up, the untrained one."""
        return [(entry.label, entry.key) for entry in self.entries()]

    @property
    def default_model(self) -> str:
        """The model the app opens with: reverse trained with 1/√d_k when shipped, else the first family."""
        if "reverse/sqrt_dk" in self.families:
            return "reverse/sqrt_dk"
        return next(iter(self.families), UNTRAINED)

    def check_model(self, model: object) -> str:
        """The model picker's value, if it names one of its entries (a family, a real model set up here, the untrained
        model); else ValueError listing them."""
        self.entry(model)
        return model

    def entry(self, model: object) -> Entry:
        """The picker entry `model` names (service.models.Entry): the one lookup of a model key, among entries();
        else ValueError listing them."""
        entries = self.entries()
        if isinstance(model, str):
            for entry in entries:
                if entry.key == model:
                    return entry
        known = ", ".join(repr(entry.key) for entry in entries)
        raise ValueError(f"Unknown model {shown(model)}; choose one of {known}.")

    def entries(self) -> list[Entry]:
        """Every picker entry in the picker's order, each answering for its kind: the trained families (FamilyEntry),
        the real models set up that read text (RealEntry, none loaded to list them; the Pictures and sound tab offers
        the others), the untrained model (UntrainedEntry)."""
        return [*self._family_entries, *(RealEntry(key, self.real) for key in self.real.text_keys),
                self._untrained_entry]

    def d_k_choices(self, model: str) -> list[int]:
        """The trained d_k values of a family, a real model's own, or [] for the untrained model (free d_k)."""
        return self.entry(model).d_k_choices()

    def default_d_k(self, model: str) -> int:
        """The d_k a model opens with: the family member nearest 16, a real model's own, 16 for the untrained model."""
        return self.entry(model).default_d_k()

    def model_shape(self, model: str, d_k: object = None) -> TransformerConfig | RealShape | None:
        """The config of a trained family member (nearest d_k), a real model's shape, None for the untrained model."""
        return self.entry(model).model_shape(d_k)

    def with_compatibility(self, model: str, compatibility: object = None) -> str:
        """The family that `model` (checked) with the compatibility picker's value names.

        For a study family, "scaled_dot", "dot" or "additive" picks the study's family of that arm; None or ""
        keeps `model`. Other models have no picker: only None, "" or their own arm is accepted.
        Raises ValueError naming the input.
        """
        if compatibility is None or compatibility == "":
            return model
        arm = check_choice(COMPATIBILITY_LABEL, compatibility, STUDY_ARMS)
        family = self.families.get(model)
        if family is not None and family.study:
            if STUDY_PREFIX + arm not in self.families:
                raise ValueError(f"{COMPATIBILITY_LABEL} {arm!r}: the study has no trained {STUDY_ARMS[arm]} model.")
            return STUDY_PREFIX + arm
        if family is not None and family.arm == arm:
            return model
        study = ", ".join(repr(key) for key, f in self.families.items() if f.study) or "none shipped"
        raise ValueError(f"{COMPATIBILITY_LABEL} {shown(compatibility)} applies only to the study's models ({study}); "
                         f"leave it empty for {model!r}.")

    def attention_model(self, which: Settings | str, means: HeadMeans | None = None) -> ServedModel:
        """The model a Settings runs (its entry's), or that a shipped checkpoint's name or a real model's key names,
        as the service asks it (service.models): ours (OwnModel) or a real one (HubModel, loaded on first use).
        means: mean ablation's reference, cached by the caller (service.runs.Runs.head_means); default, computed
        when asked."""
        if not isinstance(which, str):
            return self.entry(which.model).attention_model(which, means)
        if which in self.real:
            return self.entry(which).attention_model(None, means)
        return OwnModel(*self.trained(which), self.tokenizer, self.device, means)

    def checked_text(self, model: str, text: object) -> str:
        """`text` checked by the rule of `model`'s entry (model checked): a real model reads any text up to
        REAL_TEXT_CHARS characters; ours read printable ASCII up to their tokenizer's length. ValueError says why."""
        return self.entry(model).checked_text(text)

    def member(self, model: str, text: str, d_k: int, d_model: int, n_heads: int) -> Member:
        """What `model` (checked) runs for these checked values (service.requests.Member): a family its member nearest
        d_k (and the text lower-cased where it was trained on lower case), a real model itself (loaded if need be; its
        tokens of the text at most REAL_SOURCE_TOKENS), the untrained model d_model, n_heads and d_k (heads × d_k at
        most MAX_HEAD_WIDTH). ValueError says what is too much."""
        return self.entry(model).member(text, d_k, d_model, n_heads)

    def controls(self, model: object, d_k: int, layer: int, head: int, n_heads: object,
                 progress=None) -> ModelControls:
        """The controls a picker entry gets (service.models.ModelControls), answered by the entry: a real model's from
        its shape (loaded the first time, telling progress(fraction, text)), the untrained model's for n_heads heads,
        a family's at its member nearest d_k. layer and head are clamped into the model's ranges."""
        return self.entry(model).controls(d_k, layer, head, n_heads, progress)

    def largest_model(self) -> tuple[int, int]:
        """(layers, heads) of the largest choice: the API's bounds for the layer and head inputs (a real model's are
        LAYER_HEAD_LIMIT: it loads when first picked, so the bounds cover any)."""
        bounds = [entry.largest() for entry in self.entries()]
        return max(layers for layers, _ in bounds), max(heads for _, heads in bounds)

    @property
    def real_choices(self) -> list[tuple[str, str]]:
        """(label, value) pairs of the real models set up here that read text, in set-up order (none loaded)."""
        return [(self.real.label(k), k) for k in self.real.text_keys]

    @property
    def rng_lock(self) -> threading.Lock:
        """Held while something seeds and draws from torch's global generator (building an untrained model, a live
        training building its model): one at a time, so each gets the weights its seed promises."""
        return self._build_lock

    def snapshots(self, checkpoint: str) -> Snapshots:
        """The training snapshots shipped beside a checkpoint (data.snapshots), read once; FileNotFoundError if none."""
        if checkpoint not in self.cards:
            raise ValueError(f"Unknown checkpoint {checkpoint!r}.")
        return self._snapshots(checkpoint)

    def _read_snapshots(self, name: str) -> Snapshots:
        return load_snapshots(name, self._folders.get(name, self.models_dir))

    def trained(self, checkpoint: str) -> tuple[Transformer, dict]:
        """A shipped checkpoint's model (eval mode, shared) and card."""
        return self._checkpoint(checkpoint)

    def untrained(self, d_model: int, n_heads: int, d_k: int) -> Transformer:
        """The untrained model of this size (fixed seed, eval mode, shared)."""
        return self._untrained(d_model, n_heads, d_k)

    def _load_checkpoint(self, name: str) -> tuple[Transformer, dict]:
        with self._build_lock:
            try:
                model, card = load_model(name, device=self.device, directory=self._folders.get(name, self.models_dir))
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
