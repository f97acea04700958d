"""attention_viz: the Transformer of "Attention Is All You Need" (§3.1-3.2), every attention map exposed.

    import attention_viz as av
    model, card = av.load_model("reverse")                    # a shipped model (av.list_models())
    tok = av.CharTokenizer()
    src = torch.tensor([tok.encode("hello").ids])
    out, maps = model.greedy_decode(src, max_len=8, bos_id=tok.bos_id, eos_id=tok.eos_id)
    maps["decoder.0.cross_attn"]                              # [B, H, Q, K]
    av.show(model, "hello")                                   # every map, drawn in the browser (Jupyter)
    real = av.load_pretrained("Helsinki-NLP/opus-mt-en-de")   # a real model, our Eq. 1 inside (the hub extra)
    av.show(real, "Attention is all you need.", scale="none")

The layers, lowest first: core (the paper, torch only), fast (opt-in kernels), data (tokenizer, tasks,
checkpoints), lab (footnote 4's numbers), draw, explorer (the browser-side views and the packing of a
run they draw), labview (the √d_k lab's charts, drawn in the browser), train, service and webui (the app).
"""

from . import lab
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
from .core.maps import KINDS, AttentionMaps, head_statistics, kind_key, map_key
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
    optional extra, and importing it costs seconds the app does not spend unless a real model is set up."""
    if name in ("load_pretrained", "PretrainedTransformer"):
        try:
            from . import hub
        except ImportError as error:
            raise ImportError(f"attention_viz.{name} needs the hub extra: pip install \"attention_viz[hub]\" "
                              f"({error})") from None
        return getattr(hub, name)
    raise AttributeError(f"module 'attention_viz' has no attribute {name!r}")


__all__ = [
    "AdditiveAttention",
    "AttentionMaps",
    "CharTokenizer",
    "CheckpointError",
    "HeadImportance",
    "Decoder",
    "Encoder",
    "KINDS",
    "MultiHeadAttention",
    "TrainSettings",
    "Transformer",
    "TransformerConfig",
    "UnsafeCheckpointError",
    "Variation",
    "attention_masks",
    "attention_steps",
    "causal_mask",
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
    "multihead_attention_from_torch",
    "padding_mask",
    "qk_statistics",
    "QKStatistics",
    "resolve_device",
    "save_checkpoint",
    "scale_factor",
    "scaled_dot_product_attention",
    "show",
    "softmax_jacobian_norm",
    "softmax_row",
    "sweep",
    "train",
    "transformer_from_torch",
]
