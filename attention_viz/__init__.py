"""attention_viz: the Transformer of "Attention Is All You Need" (§3.1-3.2), every attention map exposed.

    import attention_viz as av
    model, card = av.load_model("reverse")                    # a shipped model (av.list_models())
    tok = av.CharTokenizer()
    src = torch.tensor([tok.encode("hello").ids])
    out, maps = model.greedy_decode(src, 8)                   # from <bos> until <eos>: the model's start_id, eos_ids
    maps["decoder.0.cross_attn"]                              # [B, H, Q, K]
    av.show(model, "hello")                                   # every map, drawn in the browser (Jupyter)
    real = av.load_pretrained("Helsinki-NLP/opus-mt-en-de")   # a real model, our Eq. 1 inside (the hub extra)
    av.show(real, "Attention is all you need.", scale="none")
    run = av.maps_of(model, "hello")                          # one text's maps with their tokens
    av.save_figure(run, "encoder.self_attn", None, "grid.pdf")  # a paper's figure: SVG, PDF or PNG, text as text
    av.rollout(run), av.pattern_scores(model)                 # rollout; previous / first / duplicate / induction

The layers, lowest first: core (the paper, torch only), fast (opt-in kernels), data (tokenizer, tasks,
checkpoints), lab (footnote 4's numbers), analysis (research that runs a model), draw, explorer (the browser-side views and the packing of a
run they draw), labview (the √d_k lab's charts, drawn in the browser), train, service and webui (the app).
"""

from . import lab
from .analysis.compare import compare
from .analysis.patterns import pattern_scores
from .analysis.runs import maps_of
from .core.attention import (
    AdditiveAttention,
    MultiHeadAttention,
    attention_masks,
    attention_steps,
    causal_mask,
    padding_mask,
    scale_factor,
    scaled_dot_product_attention,
)
from .core.config import TransformerConfig
from .core.device import resolve_device
from .core.interop import multihead_attention_from_torch, transformer_from_torch
from .core.alignment import Comparison
from .core.flow import attention_flow
from .core.maps import KINDS, AttentionMaps, TextMaps, head_statistics, kind_key, map_key
from .core.patterns import PatternScores
from .core.rollout import rollout
from .core.model import Decoder, Encoder, Transformer
from .core.variation import Variation
from .data.checkpoints import (
    CheckpointError,
    UnsafeCheckpointError,
    list_models,
    load_checkpoint,
    load_model,
    save_checkpoint,
)
from .data.tokenizer import CharTokenizer
from .explorer.notebook import show
from .importance import HeadImportance, head_importance
from .lab import dot_products, entropy, softmax_jacobian_norm, softmax_row, sweep
from .qkstats import QKStatistics, qk_statistics
from .train.trainer import TrainSettings, train


def __getattr__(name: str):
    """load_pretrained and PretrainedTransformer from attention_viz.hub, imported on first use: transformers is an
    optional extra, and importing it costs seconds the app does not spend unless a real model is set up; likewise
    save_figure, save_comparison and save_overlay, which import matplotlib."""
    if name in ("load_pretrained", "PretrainedTransformer"):
        try:
            from . import hub
        except ImportError as error:
            raise ImportError(f"attention_viz.{name} needs the hub extra: pip install \"attention_viz[hub]\" "
                              f"({error})") from None
        return getattr(hub, name)
    if name in ("save_figure", "save_comparison"):  # matplotlib, imported when a figure is first saved
        from .draw import vector

        return getattr(vector, name)
    if name == "save_overlay":  # attention over a picture (an image model's), matplotlib too
        from .draw.overlay import save_overlay

        return save_overlay
    raise AttributeError(f"module 'attention_viz' has no attribute {name!r}")


__all__ = [
    "AdditiveAttention",
    "AttentionMaps",
    "CharTokenizer",
    "CheckpointError",
    "Comparison",
    "HeadImportance",
    "Decoder",
    "Encoder",
    "KINDS",
    "MultiHeadAttention",
    "PatternScores",
    "TextMaps",
    "TrainSettings",
    "Transformer",
    "TransformerConfig",
    "UnsafeCheckpointError",
    "Variation",
    "attention_flow",
    "attention_masks",
    "attention_steps",
    "causal_mask",
    "compare",
    "dot_products",
    "entropy",
    "head_importance",
    "head_statistics",
    "kind_key",
    "lab",
    "list_models",
    "load_checkpoint",
    "load_model",
    "map_key",
    "maps_of",
    "multihead_attention_from_torch",
    "padding_mask",
    "pattern_scores",
    "qk_statistics",
    "QKStatistics",
    "resolve_device",
    "rollout",
    "save_comparison",
    "save_checkpoint",
    "save_figure",
    "save_overlay",
    "scale_factor",
    "scaled_dot_product_attention",
    "show",
    "softmax_jacobian_norm",
    "softmax_row",
    "sweep",
    "train",
    "transformer_from_torch",
]
