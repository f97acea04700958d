"""The short texts the app shows beside its views: titles, scaling in words, the notes on a run."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

from attention_viz.core.attention import scale_factor
from attention_viz.core.maps import KINDS
from attention_viz.service.limits import COLOUR_SCALES, STUDY_ARMS
from attention_viz.service.requests import Settings, heads_off_text
from attention_viz.service.models import Run


ADDITIVE = "w_hᵀ tanh(q_h + k_h)"  # additive attention's score, in the notes


def code(text: object) -> str:
    """`text` as a Markdown code span whatever it holds (a model's output, a token, the user's text): fenced by one
    backtick more than its longest run of backticks, and padded by a space where CommonMark would otherwise read
    its edge as part of the fence or strip a space of its own (CommonMark 0.31, code spans)."""
    text = str(text)
    if not text:
        return "` `"  # CommonMark has no empty code span: a box holding one space
    fence = "`" * (1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    edge = text[:1] == "`" or text[-1:] == "`" or (text[:1] == " " and text[-1:] == " " and text.strip() != "")
    pad = " " if edge else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def as_shown(value: float) -> str:
    """A number as the page writes a value it is sent (JavaScript's String(number)): 507.52, 0.003832, 16 (whole
    numbers without a decimal point), so a text that quotes a table's value quotes what is on screen."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def fixed(value: float, digits: int) -> str:
    """value.toFixed(digits) as the page's JavaScript writes it: the exact binary value rounded half away from zero
    (Python's own format rounds half to even: 0.0625 is 0.062 there, 0.063 on the page)."""
    value = float(value) + 0.0  # -0.0 is written 0 by the page
    return str(Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def long_shown(value: float) -> str:
    """A weight as the long view (static/long.js fmt) writes it: 0, toFixed(5) from 0.001, else toExponential(3)."""
    value = float(value)
    if value == 0:
        return "0"
    if value >= 0.001:
        return fixed(value, 5)
    exact = Decimal(value)
    power = exact.adjusted()
    mantissa = exact.scaleb(-power).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)
    if abs(mantissa) >= 10:  # 9.9996e-4 is 1.000e-3
        mantissa, power = (mantissa / 10).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP), power + 1
    return f"{mantissa}e{power:+d}"


def signed(value: float) -> str:
    """A change with its sign, as the comparison's table writes it: +0.956, −0.956 (a true minus)."""
    return f"{float(value):+.3f}".replace("-", "−")


def scaled_as(settings: Settings) -> str:
    """How a run scales QKᵀ, as a phrase after "Running it": "without scaling (plain q·k)", "with QKᵀ ×0.1 (a custom
    factor)", "with QKᵀ ×1/√16"."""
    if settings.scale == "none":
        return "without scaling (plain q·k)"
    if settings.scale == "sqrt_dk":
        return f"with QKᵀ ×1/√{settings.d_k}"
    return f"with QKᵀ ×{settings.scale:g} (a custom factor)"


def mode_of(settings: Settings) -> str:
    """The scaling a run computes: "sqrt_dk" or "none", also when given as a custom factor (1/√d_k, or 1), else
    "custom"."""
    if isinstance(settings.scale, str):
        return settings.scale
    if settings.scale == 1:
        return "none"
    return "sqrt_dk" if abs(settings.scale - settings.d_k ** -0.5) < 5e-4 else "custom"


def same_as(settings: Settings) -> str | None:
    """A custom factor that is another mode's (1, or 1/√d_k to 3 digits): a line saying so, since the run is that
    mode's and nothing on screen changes; None otherwise."""
    if isinstance(settings.scale, str) or mode_of(settings) == "custom":
        return None
    if mode_of(settings) == "none":
        return "A custom factor of 1 is no scaling at all: the same run as *off (plain q·k)*."
    return f"A custom factor of {settings.scale:g} is 1/√{settings.d_k}: the same run as *1/√d_k (paper)*."


def head_title(settings: Settings, kind: str, layer: int, head: int) -> str:
    """Two short lines over one head: which attention, layer and head, and how QKᵀ was scaled."""
    scores = ADDITIVE if settings.compatibility == "additive" else "QKᵀ"
    return f"{KINDS[kind]}, layer {layer}, head {head}\n{scores} {scaling_text(settings)}"


def scaling_text(settings: Settings) -> str:
    """How QKᵀ was scaled, in words: "×1/√16 = 0.25", "unscaled", "×0.1 (custom)"; additive attention is never
    scaled."""
    if settings.compatibility == "additive":
        return "not scaled (additive attention)"
    if settings.scale == "sqrt_dk":
        return f"×1/√{settings.d_k} = {scale_factor('sqrt_dk', settings.d_k):.3g}"
    if settings.scale == "none":
        return "unscaled"
    return f"×{settings.scale:g} (custom)"


def run_title(run: Run) -> str:
    """The heading of a packed run: the text and the model it ran on."""
    return f"“{run.settings.text}” on {run.settings.name}"


def settings_record(settings: Settings) -> dict:
    """The settings a run was computed with, as JSON values (d_k as used: a trained family's member)."""
    scale = settings.scale if isinstance(settings.scale, str) else float(settings.scale)
    return {"text": settings.text, "model": settings.model, "checkpoint": settings.checkpoint, "d_k": settings.d_k,
            "scale": scale, "causal_mask": settings.causal_mask, "padding_mask": settings.padding_mask,
            "pad_tokens": settings.pad_tokens, "d_model": settings.d_model, "n_heads": settings.n_heads,
            "heads_off": {key: list(heads) for key, heads in settings.heads_off}, "ablation": settings.ablation,
            **({} if settings.position_bias else {"position_bias": False})}


def alphabet_text(alphabet: str) -> str:
    """A card's alphabet in words, runs of three or more as ranges: "a–z", "a–z, space and 0–9"."""
    runs: list[str] = []  # consecutive characters (by code point, in the alphabet's order) become one run
    for ch in alphabet:
        if runs and ord(ch) == ord(runs[-1][-1]) + 1:
            runs[-1] += ch
        else:
            runs.append(ch)
    parts = []
    for run in runs:
        if len(run) >= 3:
            parts.append(f"{run[0]}–{run[-1]}")
        else:
            parts.extend("space" if ch == " " else ch for ch in run)
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def own_output(run: Run) -> str:
    """Our model's output box: the generated string, or a note that an untrained model has nothing to say."""
    if not run.trained:
        return f"(untrained model: no meaningful output; greedy decoding gives {run.output!r})"
    return run.output if run.finished else f"{run.output} … (no <eos> after {len(run.generated)} tokens)"


def real_output(run: Run) -> str:
    """A real model's output box: what it wrote, or that an encoder writes nothing."""
    if not run.tgt_ids and not run.output:
        return f"({run.config.family} is an encoder: it writes no text)"
    return run.output if run.finished else f"{run.output} … (no end token after {len(run.generated)} tokens)"


def run_notes(run: Run, about: list[str]) -> str:
    """Markdown notes on a run: `about` (the model's own notes on it: which model, d_k, how it was trained, the output
    against the task; its ServedModel.notes), then the scaling and masks."""
    s = run.settings
    lines = list(about)
    scores = ADDITIVE if s.compatibility == "additive" else "QKᵀ"
    unscaled = getattr(run.config, "scaling_note", "") and s.scale == "sqrt_dk"  # T5: its own factor is 1
    scaled = "×1, the model's own factor (it has no 1/√d_k)" if unscaled else scaling_text(s)
    lines.append(
        f"Scores {scores} {scaled}; {causal_text(s, 'decoder.self_attn' in run.kinds)}; "
        f"{s.pad_tokens} pad token{'s' if s.pad_tokens != 1 else ''} with the padding mask "
        f"{'on' if s.padding_mask else 'off'}. Hatched cells are masked (weight exactly 0)."
    )
    return "\n\n".join(lines)


def causal_text(settings: Settings, causal: bool) -> str:
    """The causal mask in words, as it holds for the model: on or off where it has decoder self-attention (causal),
    else that it has none (an encoder alone: every token sees every other)."""
    if not causal:
        return "no causal mask (an encoder: every token sees every other)"
    return f"causal mask {'on' if settings.causal_mask else 'off'}"


def own_notes(run: Run) -> list[str]:
    """The first notes on our model's run: which model, d_k, how it was trained, the output against the task."""
    s, c = run.settings, run.config
    lines = []
    if run.card is None:
        lines.append(
            f"**Untrained model** (random weights, seed 0): d_model {c.d_model}, h {c.n_heads}, d_k {c.d_k}, "
            f"d_v {c.d_v}, N {c.n_encoder_layers}. Its output is noise; the maps show attention before any learning."
        )
        return lines
    card = run.card
    accuracy = card.get("heldout_exact_match")
    additive = c.compatibility == "additive"
    trained = ("additive attention " + ADDITIVE + ", no scaling" if additive
               else "1/√d_k" if card.get("scale") == "sqrt_dk" else "no scaling")
    arm = "additive" if additive else "scaled_dot" if card.get("scale") == "sqrt_dk" else "dot"
    study = (f" (compatibility study, seed {card.get('seed', 0)}: {STUDY_ARMS[arm]})"
             if card.get("family") == "study" else "")
    lines.append(
        f"**{card.get('task', 'model')}**, checkpoint {code(card['name'])}{study}: d_model {c.d_model}, h {c.n_heads}, "
        f"d_k {c.d_k}, N {c.n_encoder_layers}, trained with {trained}"
        + (f", held-out exact match {accuracy:.1%}"
           + (f" on its {card['heldout_size']:,} held-out strings." if isinstance(card.get("heldout_size"), int)
              else ".") if isinstance(accuracy, (int, float)) else ".")
    )
    if additive:
        lines.append(f"Scaling does not apply: additive attention scores {ADDITIVE} have no QKᵀ and no 1/√d_k, "
                     "so the scaling control changes nothing in this run.")
    elif (mode_of(s) == "sqrt_dk") != (card.get("scale") == "sqrt_dk"):
        lines.append(f"Running it {scaled_as(s)}, not as it was trained: watch the output change.")
    same = same_as(s)
    if same and not additive:
        lines.append(same)
    alphabet = card.get("alphabet")
    if s.typed is not None:
        lines.append(f"Capitals lower-cased: the model was trained on {alphabet_text(alphabet)} only, so "
                     f"{code(s.typed)} runs as {code(s.text)}.")
    if alphabet:
        new = list(dict.fromkeys(ch for ch in s.text if ch not in alphabet))
        if new:
            lines.append(f"Trained on {alphabet_text(alphabet)} only; new to it: "
                         + ", ".join(repr(ch) for ch in new) + ".")
    max_len = card.get("max_len")
    if isinstance(max_len, int) and len(s.text) > max_len:
        lines.append(f"Trained on texts of at most {max_len} characters; this one has {len(s.text)}.")
    if run.expected is not None:
        verdict = "✓ matches" if run.finished and run.output == run.expected else "✗ differs from"
        lines.append(f"Output {code(run.output)} {verdict} the task's answer {code(run.expected)}.")
    return lines


def heads_off_note(run: Run, every_head_on: Run) -> str | None:
    """What switching heads off did (None when every head is on): which, how, and the output with every head on."""
    s = run.settings
    if not s.heads_off:
        return None
    total = sum(run.n_layers(kind) for kind in run.kinds) * run.config.n_heads
    what = ("outputs set to 0 before W_O (Michel's gate ξ_h = 0)" if s.ablation == "zero" else
            "outputs replaced by each head's mean output over reference texts before W_O")
    listed = "; ".join(f"{key} head{'s' if len(heads) > 1 else ''} {', '.join(map(str, heads))}"
                       for key, heads in s.heads_off)
    same = run.output == every_head_on.output and run.finished == every_head_on.finished
    change = (f"the output is the same as with every head on ({code(every_head_on.output)})" if same else
              f"with every head on it writes {code(every_head_on.output)}; now {code(run.output)}")
    return (f"**{s.n_off} of {total} heads switched off** ({s.ablation} ablation: their "
            f"{what}): {listed}. Their maps are still computed and drawn, marked off; {change}.")


def real_notes(run: Run) -> list[str]:
    """The first notes on a real model's run: what it is, its shape, and what the run itself said."""
    s, c = run.settings, run.config
    layers = (f"N {c.n_encoder_layers} + {c.n_decoder_layers}" if c.n_encoder_layers and c.n_decoder_layers
              else f"N {c.n_encoder_layers or c.n_decoder_layers}")
    lines = [f"**{s.checkpoint}**, a real {c.family} model ({c.about}): d_model {c.d_model}, h {c.n_heads}, "
             f"d_k {c.d_k}, {layers}. Its tokens are its own subword pieces ({len(run.src_tokens or run.tgt_tokens)} "
             f"in the {'source' if run.src_tokens else 'prompt and output'})."]
    if mode_of(s) != "sqrt_dk":
        lines.append(f"Running it {scaled_as(s)}, not as it was trained (1/√{c.d_k}): watch the "
                     "maps flatten or sharpen and the output change.")
        if same_as(s):
            lines.append(same_as(s))
    if not s.position_bias:
        lines.append("Position bias taken out (B = 0): each map is softmax(QKᵀ·s) without the B the model adds; "
                     "B is its only sense of word order (it has no other positions).")
    if not s.causal_mask and "decoder.self_attn" in run.kinds:
        lines.append("Causal mask lifted: every position now sees the ones after it, which the model never saw in "
                     "training.")
    lines.extend(run.notes)
    return lines


def snapped_note(requested: int, settings: Settings, d_k_fixed: bool) -> str | None:
    """A note when a trained family has no model at the requested d_k and its nearest one is shown, or the model's
    weights fix its d_k (d_k_fixed: its Abilities.d_k_fixed)."""
    if requested == settings.d_k:  # the untrained model takes any d_k it allows: never snapped
        return None
    if d_k_fixed:
        return f"This model's d_k is {settings.d_k}, fixed by its weights; d_k = {requested} is not one it has."
    return f"No trained model with d_k = {requested}; showing the nearest, d_k = {settings.d_k}."


def no_difference_reason(what: str, kind: str, settings: Settings) -> str:
    """Why switching `what` leaves this head unchanged."""
    if what == "causal_mask" and kind == "encoder.self_attn":
        return "the causal mask exists only in decoder self-attention, and the encoder runs before the decoder."
    if what == "padding_mask" and settings.pad_tokens == 0:
        return "there are no pad tokens; add some with the pad-tokens slider."
    if what == "padding_mask" and kind == "decoder.self_attn":
        return "the pads are in the source, which decoder self-attention never sees."
    if what == "scaling" and settings.compatibility == "additive":
        return f"additive attention ({ADDITIVE}) has no QKᵀ to scale, so the switch changes nothing."
    if what == "scaling" and settings.d_k == 1:
        return "with d_k = 1 the factor 1/√d_k is 1."
    return "this head's weights are the same either way."


def export_record(settings: Settings, kind: str, layer: int, head: int, colour_scale: str,
                  causal: bool = True) -> dict[str, str]:
    """What an export was made with, in words: the model, the text, scaling, masks (the causal mask where the model
    has decoder self-attention, `causal`; else "none"), d_k, the heads switched off and their ablation (only when
    some are), and the view."""
    return {
        "model": settings.name,
        "text": settings.text,
        "d_k": str(settings.d_k),
        "scaling": scaling_text(settings),
        "causal mask": ("on" if settings.causal_mask else "off") if causal else "none (an encoder)",
        "padding mask": "on" if settings.padding_mask else "off",
        "pad tokens": str(settings.pad_tokens),
        # heads switched off change every map after them: a file of such a run must not read as the plain run
        **({"heads off": heads_off_text(settings.heads_off), "ablation": settings.ablation} if settings.heads_off
           else {}),
        "attention": KINDS[kind],
        "layer": str(layer),
        "head": str(head),
        "colour scale": COLOUR_SCALES.get(colour_scale, colour_scale),
    }


def export_stem(settings: Settings, kind: str) -> str:
    """The start of an export's file names: the model as the picker names it, the text and the attention kind, in
    safe characters."""
    text = "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in settings.text)[:24].strip("-") or "text"
    return f"{file_name(settings.name)}__{text}__{kind.replace('.', '_')}"


FILE_NAME_CHARS = 96  # a model's part of an export's file name at most (a Hub id is at most 96 characters)


def file_name(name: str) -> str:
    """A name as safe characters for a file name (ASCII letters, digits, "_" and "."; a run of anything else one "-";
    √ as "sqrt"): "reverse (trained with 1/√d_k), d_k = 16" -> "reverse-trained-with-1-sqrtd_k-d_k-16"."""
    safe = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_.") else "-" for ch in name.replace("√", "sqrt"))
    return "-".join(part for part in safe.split("-") if part)[:FILE_NAME_CHARS].strip(".-") or "model"
