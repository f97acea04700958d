"""Our own models as the service asks them (service.models.ServedModel): a shipped checkpoint or the untrained
Transformer, our character tokenizer and the checkpoint's card; and our picker entries (service.models.Entry):
FamilyEntry, a trained family whose d_k control moves through its members, and UntrainedEntry, random weights of any
size within the limits, with the controls each gets (service.models.ModelControls).

Every call into core goes through OwnModel._switches: the settings' scaling, masks and heads off as forward
arguments. The model is shared between users: never mutated.

Axes: H heads, Q query positions, K key positions.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from attention_viz.core.attention import attention, scale_factor
from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer
from attention_viz.data.tasks import heldout_strings, target_or_none, task_max_len
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.fast.decode import greedy_decode as fast_greedy_decode
from attention_viz.importance import head_importance, head_means
from attention_viz.qkstats import qk_statistics
from attention_viz.service import texts
from attention_viz.service.checks import check_int, check_text
from attention_viz.service.limits import (
    DATE_EXAMPLES,
    DEFAULT_UNTRAINED,
    D_K_RANGE,
    EXAMPLES,
    EXTRA_DECODE_STEPS,
    HEADS_RANGE,
    MAX_HEAD_WIDTH,
    MEAN_REFERENCE_STRINGS,
    SCALE_CHOICES,
    UNTRAINED,
    UNTRAINED_LAYERS,
)
from attention_viz.service.models import Abilities, HeadMeans, ModelControls, Run, Steps, frozen, pass_arguments
from attention_viz.service.requests import HeadRequest, Member, Settings, known_case, model_keys
from attention_viz.service.scores import EOS


def own_abilities(compatibility: str, trained: bool) -> Abilities:
    """What one of our models can do: write text, switch the causal mask and its scaling (additive attention has
    none to switch); its heads are scored on its task when trained."""
    return Abilities(writes_text=True, fills_masks=False, causal=True, compatibility=compatibility,
                     scalings=() if compatibility == "additive" else tuple(SCALE_CHOICES), d_k_fixed=False,
                     scored_on="task" if trained else None, unscored="" if trained else UNTRAINED_UNSCORED)


UNTRAINED_UNSCORED = ("This model has no task to score its heads on (it was never trained): pick a trained model, or a "
                      "real one that writes text (scored on your text).")


class OwnModel:
    """One of our Transformers (eval mode, shared) with its card (None when untrained) and the app's tokenizer."""

    sink = EOS

    def __init__(self, network: Transformer, card: dict | None, tokenizer: CharTokenizer, device: torch.device,
                 means: HeadMeans | None = None) -> None:
        self.network, self.card, self.tokenizer, self.device = network, card, tokenizer, device
        self.shape = network.config
        self._means = means or self.head_means
        self.abilities = own_abilities(self.shape.compatibility, card is not None)

    @property
    def keys(self) -> dict[str, int]:
        return model_keys(self.shape)

    @property
    def task(self) -> str:
        """Its task ("copy" for the untrained model: the reference of its means)."""
        return self.card.get("task", "copy") if self.card else "copy"

    def tokens(self, text: str) -> list[str]:
        return self.tokenizer.tokens(self.tokenizer.encode(text).ids)

    def _switches(self, settings: Settings, heads: bool = True) -> dict:
        """Its pass arguments under `settings` (models.pass_arguments, its own head means)."""
        return pass_arguments(settings, self._means, heads)

    def _ids(self, run: Run) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.tensor([run.src_ids], device=self.device),  # (1, S)
                torch.tensor([run.tgt_ids], device=self.device))  # (1, T)

    def run(self, settings: Settings) -> Run:
        tok, card = self.tokenizer, self.card
        src_ids = tok.encode(settings.text).ids + [tok.pad_id] * settings.pad_tokens
        src = torch.tensor([src_ids], device=self.device)  # (1, S)
        # The tasks' answers are at most as long as the text; a trained model may overrun a little (shown as
        # unfinished), an untrained one never emits <eos>, so it decodes exactly as many tokens as the source has.
        max_len = len(settings.text) + 1 + (EXTRA_DECODE_STEPS if card is not None else 0)
        norms: dict[str, torch.Tensor] = {}  # value_norms of the maps' own pass, kept with the run
        expected = target_or_none(card["task"], settings.text) if card and "task" in card else None
        guess = None if expected is None else tok.encode(expected).ids  # its answer, <eos> last
        with torch.inference_mode():
            # the reference's decode, bit for bit, with less Python per step, its task's answer checked first as a
            # guess (attention_viz.fast.decode)
            generated, maps = fast_greedy_decode(self.network, src, max_len, **self._switches(settings),
                                                 value_norms=norms, guess=guess)
        out_ids = generated[0].tolist()
        tgt_ids = [self.network.start_id] + out_ids[:-1]  # the decoder input whose maps greedy_decode returned
        arrays = frozen({key: value[0] for key, value in maps.to_numpy().items()})  # key -> (H, Q, K)
        return Run(
            settings=settings, config=self.shape, card=card,
            src_ids=tuple(src_ids), tgt_ids=tuple(tgt_ids),
            src_tokens=tuple(tok.tokens(src_ids)), tgt_tokens=tuple(tok.tokens(tgt_ids)),
            generated=tuple(tok.tokens(out_ids)), output=tok.decode(out_ids), finished=tok.eos_id in out_ids,
            expected=expected,
            maps=arrays, norms=frozen({key: value[0].float().cpu().numpy() for key, value in norms.items()}),
        )

    def teacher_forced_maps(self, run: Run, settings: Settings) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            _, maps = self.network(*self._ids(run), **self._switches(settings))
        return {key: value[0] for key, value in maps.to_numpy().items()}

    def masks_under(self, run: Run, settings: Settings) -> dict[str, np.ndarray]:
        return run.masks_under(settings)

    def step_maps(self, run: Run) -> list[dict[str, np.ndarray]]:
        with torch.inference_mode():
            steps = self.network.step_maps(*self._ids(run), **self._switches(run.settings))
        return [{key: value[0] for key, value in step.to_numpy().items()} for step in steps]

    def steps(self, run: Run, request: HeadRequest) -> Steps:
        """The inputs are what the attention receives in forward on the run's ids (Transformer.attention_inputs:
        the stacks run up to that attention, no hooks on the shared model)."""
        settings, kind, head = run.settings, request.kind, request.head
        module = self.network.attention_module(kind, request.layer)
        with torch.inference_mode():
            query, key, value, mask = self.network.attention_inputs(
                *self._ids(run), kind, request.layer, **self._switches(settings),
            )  # (1, Q, D), (1, K, D), (1, K, D), mask broadcastable to (1, H, Q, K) or None
            q, k, v = module.project(query, key, value)  # (1, H, Q, d_k), (1, H, K, d_k), (1, H, K, d_v)
            head_mask = None
            if mask is not None:
                head_mask = torch.broadcast_to(mask, (1, module.n_heads, q.size(2), k.size(2)))[0, head]  # (Q, K)
            intermediates: dict[str, torch.Tensor] = {}
            attention(q[0, head], k[0, head], v[0, head], head_mask, settings.scale,
                      compatibility=module.compatibility.head(head), steps=intermediates)
        queries, keys = run.tokens(kind)
        arrays = {name: t.float().cpu().numpy() for name, t in intermediates.items()}
        return Steps(arrays, queries, keys, scale_factor(settings.scale, settings.d_k))

    def value_norms(self, run: Run) -> dict[str, np.ndarray]:
        if run.norms is not None:  # the decode's own pass (run)
            return run.norms
        with torch.inference_mode():
            norms = self.network.value_norms(*self._ids(run), **self._switches(run.settings))
        return {key: value[0].float().cpu().numpy() for key, value in norms.items()}

    def head_means(self, settings: Settings) -> dict[str, torch.Tensor]:
        """Over its task's first MEAN_REFERENCE_STRINGS held-out strings (the untrained model's: copy's)."""
        task = self.task
        strings = heldout_strings(min(task_max_len(task), self.tokenizer.max_len), MEAN_REFERENCE_STRINGS, task=task)
        with torch.inference_mode():
            return head_means(self.network, strings, task, self.tokenizer, **self._switches(settings, heads=False))

    def head_importance(self, settings: Settings, ablation: str, n_texts: int, chunk: int,
                        partial: Callable | None = None):
        return head_importance(self.network, self.card["task"], scale=settings.scale, ablation=ablation,
                               n_texts=n_texts)

    def qk_statistics(self, n_texts: int, sentences: tuple[str, ...]) -> dict:
        card = self.card
        strings = heldout_strings(card["max_len"], n_texts, task=card["task"])
        return qk_statistics(self.network, strings, tokenizer=CharTokenizer(max_len=card["max_len"]),
                             scale=card["scale"], keep_logits=True)

    def qk_texts(self, n_texts: int, sentences: tuple[str, ...]) -> str:
        return f"{n_texts} held-out strings of its task ({self.card['task']}), decoded as it writes them"

    def notes(self, run: Run) -> list[str]:
        return texts.own_notes(run)

    def output_text(self, run: Run) -> str:
        return texts.own_output(run)


def untrained_controls(n_heads: object, d_k: int, layer: int, head: int) -> ModelControls:
    """The untrained model's controls with `n_heads` heads (checked here): any d_k its heads allow, a log₂ slider."""
    n_heads = check_int("heads", n_heads, *HEADS_RANGE)
    # the widest d_k these heads allow (h·d_k ≤ MAX_HEAD_WIDTH): the log₂ slider stops at its last power of two,
    # and a d_k beyond it comes down to that power, so more heads never leave the controls on a d_k the run would
    # refuse (one typed up to `widest` is still taken)
    widest = min(D_K_RANGE[1], MAX_HEAD_WIDTH // n_heads)
    top = math.floor(math.log2(widest))
    return ModelControls(
        own_abilities("dot_product", trained=False), True, d_k if d_k <= widest else 2 ** top, 0.0, float(top), 1.0,
        UNTRAINED_LAYERS - 1, n_heads - 1, min(layer, UNTRAINED_LAYERS - 1), min(head, n_heads - 1), "sqrt_dk",
        f"Any d_k from {D_K_RANGE[0]} to {widest} with {n_heads} head{'s' * (n_heads > 1)} "
        f"(heads × d_k ≤ {MAX_HEAD_WIDTH}).",
        text_info="The untrained model takes any printable ASCII character; its output means nothing.",
        examples=tuple(EXAMPLES),
    )


def family_controls(family, config: TransformerConfig, card: dict, layer: int, head: int) -> ModelControls:
    """A trained family's controls (service.catalog.ModelFamily) at its member whose config and card are given: the
    d_k control stops at its members only; its training scale; the study's picker for a study family."""
    abilities = own_abilities(config.compatibility, trained=True)
    logs = [math.log2(value) for value in family.d_ks]
    # Powers of two evenly spaced on the log axis (4, 16, 64, 256: step 2) land the slider on members only.
    whole = all(value.is_integer() for value in logs)
    step = math.gcd(*(int(b - a) for a, b in zip(logs, logs[1:], strict=False))) if whole and len(logs) > 1 else 1
    max_layer = min(config.n_encoder_layers, config.n_decoder_layers) - 1
    note = "Trained d_k: " + ", ".join(str(value) for value in family.d_ks) + "."
    if not abilities.scalings:
        note += " Additive attention has no QKᵀ: scaling does not apply."
    return ModelControls(
        abilities, False, config.d_k, min(logs), max(logs) if len(logs) > 1 else min(logs) + 1,
        float(step) if whole else 0.25, max_layer, config.n_heads - 1, min(layer, max_layer),
        min(head, config.n_heads - 1), family.scale, note, family.study, family.arm if family.study else None,
        tuple(family.d_ks), trained_on(card),
        examples=tuple(DATE_EXAMPLES if card.get("task") == "dates" else EXAMPLES),
    )


def trained_on(card: dict) -> str:
    """What a trained model knows, said under the text box before a run (its card's task, alphabet and lengths)."""
    task, alphabet, max_len = card.get("task", "This model"), card.get("alphabet"), card.get("max_len")
    known = f"{texts.alphabet_text(alphabet)}" if alphabet else "the characters it was trained on"
    lengths = f", 1 to {max_len} characters" if isinstance(max_len, int) else ""
    example = " (a date in words, e.g. “first of may 1999”)" if task == "dates" else ""
    return (f"{task} was trained on {known}{lengths}{example}: capitals run lower-cased, and any other character "
            "is named in the notes.")


class FamilyEntry:
    """A trained family's picker entry (service.models.Entry): `family` a service.catalog.ModelFamily, its members'
    cards in `cards` (checkpoint name -> card), `trained(name)` a member's shared (model, card), loaded once."""

    def __init__(self, family, cards: dict[str, dict], tokenizer: CharTokenizer, device: torch.device,
                 trained: Callable[[str], tuple[Transformer, dict]]) -> None:
        self.family, self.cards, self.tokenizer, self.device, self._trained = family, cards, tokenizer, device, trained
        self.key, self.label = family.key, family.label

    def d_k_choices(self) -> list[int]:
        return self.family.d_ks

    def default_d_k(self) -> int:
        """The member nearest the untrained model's d_k (16)."""
        return self.family.nearest(DEFAULT_UNTRAINED["d_k"])[0]

    def model_shape(self, d_k: object = None) -> TransformerConfig:
        """The config of its member nearest d_k."""
        d_k = self.default_d_k() if d_k is None else check_int("d_k", d_k, *D_K_RANGE)
        return TransformerConfig(**self.cards[self.family.nearest(d_k)[1]]["config"])

    def largest(self) -> tuple[int, int]:
        configs = [self.model_shape(d_k) for d_k in self.family.d_ks]
        return (max(max(c.n_encoder_layers, c.n_decoder_layers) for c in configs), max(c.n_heads for c in configs))

    def controls(self, d_k: int, layer: int, head: int, n_heads: object, progress=None) -> ModelControls:
        """At its member nearest d_k."""
        return family_controls(self.family, self.model_shape(d_k), self.cards[self.family.nearest(d_k)[1]], layer,
                               head)

    def checked_text(self, text: object) -> str:
        """Printable ASCII up to the tokenizer's length."""
        return check_text(text, self.tokenizer.max_len)

    def member(self, text: str, d_k: int, d_model: int, n_heads: int) -> Member:
        """Its member nearest d_k, the text lower-cased where that member was trained on lower case."""
        d_k, checkpoint = self.family.nearest(d_k)
        card = self.cards[checkpoint]
        text, typed = known_case(text, card.get("alphabet"))
        config = card["config"]
        keys = model_keys(TransformerConfig(vocab_size=1, n_encoder_layers=config["n_encoder_layers"],
                                            n_decoder_layers=config["n_decoder_layers"], d_model=config["d_model"],
                                            n_heads=config["n_heads"], d_k=d_k))
        return Member(checkpoint, d_k, config["d_model"], config["n_heads"], text, typed,
                      config.get("compatibility", "dot_product"), keys, f"{self.label}, d_k = {d_k}")

    def attention_model(self, settings: Settings | None, means: HeadMeans | None = None) -> OwnModel:
        """The member the settings name (settings.checkpoint)."""
        network, card = self._trained(settings.checkpoint)
        return OwnModel(network, card, self.tokenizer, self.device, means)


class UntrainedEntry:
    """The untrained model's picker entry (service.models.Entry): random weights at any d_k, d_model and number of
    heads within the limits; `untrained(d_model, n_heads, d_k)` the shared model of a size, built once."""

    key, label = UNTRAINED, "untrained (random weights)"

    def __init__(self, tokenizer: CharTokenizer, device: torch.device,
                 untrained: Callable[[int, int, int], Transformer]) -> None:
        self.tokenizer, self.device, self._untrained = tokenizer, device, untrained

    def d_k_choices(self) -> list[int]:
        return []  # any d_k

    def default_d_k(self) -> int:
        return DEFAULT_UNTRAINED["d_k"]

    def model_shape(self, d_k: object = None) -> None:
        return None  # the request's own sizes

    def largest(self) -> tuple[int, int]:
        return UNTRAINED_LAYERS, HEADS_RANGE[1]

    def controls(self, d_k: int, layer: int, head: int, n_heads: object, progress=None) -> ModelControls:
        return untrained_controls(n_heads, d_k, layer, head)

    def checked_text(self, text: object) -> str:
        """Printable ASCII up to the tokenizer's length."""
        return check_text(text, self.tokenizer.max_len)

    def member(self, text: str, d_k: int, d_model: int, n_heads: int) -> Member:
        """The model of these sizes, heads × d_k at most MAX_HEAD_WIDTH."""
        if n_heads * d_k > MAX_HEAD_WIDTH:
            raise ValueError(f"heads × d_k is {n_heads} × {d_k} = {n_heads * d_k}; the untrained model allows at "
                             f"most {MAX_HEAD_WIDTH}. Lower d_k or the number of heads.")
        config = TransformerConfig(vocab_size=1, n_encoder_layers=UNTRAINED_LAYERS,
                                   n_decoder_layers=UNTRAINED_LAYERS, d_model=d_model, n_heads=n_heads, d_k=d_k)
        return Member(None, d_k, d_model, n_heads, text, None, "dot_product", model_keys(config),
                      f"{self.label}, d_model = {d_model}, h = {n_heads}, d_k = {d_k}")

    def attention_model(self, settings: Settings | None, means: HeadMeans | None = None) -> OwnModel:
        """The model of the settings' d_model, n_heads and d_k."""
        network = self._untrained(settings.d_model, settings.n_heads, settings.d_k)
        return OwnModel(network, None, self.tokenizer, self.device, means)
