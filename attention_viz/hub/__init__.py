"""Real Transformers through Hugging Face transformers (the optional extra `pip install ".[hub]"`), our Eq. 1 inside.

    from attention_viz import hub
    model = hub.load_pretrained("Helsinki-NLP/opus-mt-en-de")      # or hub.PretrainedTransformer(model, tokenizer)
    src = model.encode("Attention is all you need.")
    out, maps = model.greedy_decode(src.ids[None], max_new_tokens=30, scale="none")

Every attention of the model runs attention_viz.core's Eq. 1 with our switches (scale, causal_mask,
padding_mask) as forward arguments and records its map under our keys. Any model whose attention goes through
transformers' attention interface runs, proven on load against its own eager attention (model.fidelity). Weights load from safetensors only;
remote code never runs. Every model load_pretrained refuses raises ModelRefusedError (a ValueError), whose message
names the model and what is wrong, fit to show a visitor as it is.
"""

from attention_viz.hub.attention import IMPLEMENTATION
from attention_viz.hub.checks import UnsafeWeightsError
from attention_viz.hub.families import Family, ModelRefusedError, UnsupportedModelError, family_of
from attention_viz.hub.loading import ModelUnavailableError, fetch, load_pretrained
from attention_viz.hub.model import Abilities, Encoding, PretrainedTransformer
from attention_viz.hub.positions import TextTooLongError
from attention_viz.hub.proof import Fidelity

__all__ = [
    "Abilities",
    "IMPLEMENTATION",
    "Encoding",
    "Family",
    "Fidelity",
    "ModelRefusedError",
    "ModelUnavailableError",
    "PretrainedTransformer",
    "TextTooLongError",
    "UnsafeWeightsError",
    "UnsupportedModelError",
    "family_of",
    "fetch",
    "load_pretrained",
]
