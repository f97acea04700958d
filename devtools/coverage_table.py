"""How devtools.coverage describes an architecture and reports its results: the layout and what is special about its
attention (the table's columns), the markdown table, and its place in docs/real_models.md between MARKERS."""

from __future__ import annotations

from pathlib import Path

import torch

from devtools import tiny_archs
from devtools.eager_reference import eager_pass

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "real_models.md"
MARKERS = ("<!-- architectures:start (python -m devtools.coverage --write) -->", "<!-- architectures:end -->")


def layout_of(model_type: str, model, inputs: dict) -> str:
    """encoder-decoder, decoder or encoder, as the table calls it: a model whose eager self-attention never looks
    ahead is a decoder (BERT is in the causal-LM mapping too, as a decoder it can be built as; built as itself, it
    is an encoder); with no map to tell, a type of the causal-LM mapping is a decoder."""
    if getattr(model.config, "is_encoder_decoder", False):
        return "encoder-decoder"
    try:
        maps = eager_pass(model, inputs)[1]["self_attn"]
    except Exception:  # noqa: BLE001 - the checks will say what the eager model does not do
        maps = []
    if maps:
        ahead = torch.ones(maps[0].shape[-2:], dtype=torch.bool).triu(1)
        return "encoder" if bool((maps[0][..., ahead] != 0).any()) else "decoder"
    return "decoder" if model_type in tiny_archs._mappings()["causal-lm"] else "encoder"


def special_of(model, calls: list) -> str:
    """What is special about an architecture's attention, from its config and what its attention is handed."""
    text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    found = []

    class Safe:  # a config's field, or None where reading it raises (per-layer fields of heterogeneous configs)
        def __getattr__(self, name):
            try:
                return getattr(text, name)
            except Exception:  # noqa: BLE001
                return None

    config = Safe()
    heads, kv = getattr(config, "num_attention_heads", None), getattr(config, "num_key_value_heads", None)
    if heads and kv and kv < heads:
        found.append("GQA")
    if getattr(config, "kv_lora_rank", None):
        found.append("MLA")
    kinds = set(getattr(config, "layer_types", None) or [])
    if getattr(config, "sliding_window", None) or getattr(config, "attention_window", None) or \
            getattr(config, "local_radius", None) or \
            any("sliding" in k for k in kinds) or \
            any("sliding_window" in c[4] for c in calls):
        found.append("sliding window")
    if getattr(config, "attention_chunk_size", None):
        found.append("chunked")
    if getattr(config, "attn_logit_softcapping", None) or any("softcap" in c[4] for c in calls):
        found.append("softcap")
    if any("s_aux" in c[4] or "sinks" in c[4] for c in calls):
        found.append("sinks")
    if any(getattr(config, n, None) for n in ("num_experts", "num_local_experts", "n_routed_experts",
                                              "moe_num_experts")):
        found.append("MoE")
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    if {"q_norm", "k_norm"} <= names or {"q_layernorm", "k_layernorm"} <= names:
        found.append("q/k norm")
    if model.config.model_type == "bloom" or getattr(config, "alibi", None) is True or \
            getattr(getattr(config, "attn_config", None), "alibi", False) is True:
        found.append("ALiBi")
    if any("indices" in c[4] or "block_indices" in c[4] for c in calls):
        found.append("top-k sparse")
    if any("position_bias" in c[4] or "relative" in " ".join(c[4]) for c in calls):
        found.append("position bias")
    terms = next((c[4]["bias_terms"].strip("{}") for c in calls if "bias_terms" in c[4]), None)  # "c2p, p2c"
    if terms is not None:  # DeBERTa's disentangled terms, or XLNet's relative ones (bd: positions, ef: segments)
        found.append("disentangled (c2c, c2p, p2c)" if "c2p" in terms else f"relative terms (c2c, {terms})")
    other = kinds - {"full_attention", "sliding_attention", "chunked_attention", "attention"}
    if other:
        found.append("hybrid (" + ", ".join(sorted(other)) + ")")
    if not calls:
        found.append("no attention interface call")
    return ", ".join(found)


# -- the table


def table(results: list) -> str:
    """The markdown section's body: a count and a row per text architecture (devtools.coverage's Results; the
    skipped ones counted only)."""
    shown = [r for r in results if r.result != "skipped"]
    counts = {kind: sum(r.result == kind for r in results) for kind in
              ("passed", "refused", "failed", "unchecked", "not built", "error", "skipped")}
    lines = [", ".join(f"{n} {kind}" for kind, n in counts.items()) + f" of {len(results)} model types.", "",
             "| model type | layout | what is special | result | max diff |", "|---|---|---|---|---|"]
    for r in shown:
        outcome = r.result if r.result == "passed" else f"{r.result}: {_cell(r.reason)}"
        diff = "" if r.max_diff is None else f"{r.max_diff:.1e} ({r.dtype})"
        lines.append(f"| `{r.model_type}` | {r.layout} | {r.special} | {outcome} | {diff} |")
    return "\n".join(lines)


def _cell(text: str, limit: int = 160) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def write(results: list, doc: Path = DOC) -> None:
    """The table into `doc` between MARKERS (a section "Architectures covered" added at the end if absent)."""
    text = doc.read_text(encoding="utf-8")
    body = f"{MARKERS[0]}\n{table(results)}\n{MARKERS[1]}"
    if MARKERS[0] in text:
        before, rest = text.split(MARKERS[0], 1)
        text = before + body + rest.split(MARKERS[1], 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Architectures covered\n\n" + body + "\n"
    doc.write_text(text, encoding="utf-8")
