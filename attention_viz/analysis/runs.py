"""One text through a model, as research code wants it: TextMaps (every map of one example, its tokens, its masks).

Our Transformer greedy-decodes the text and keeps the maps of the last step (the decoder's input is <bos> + the output
but its last token), as the explorer does; a real model (attention_viz.hub) runs as hub.text_run does. Either way the
switches are arguments.
"""

from __future__ import annotations

import torch

from attention_viz.core.attention import Scale
from attention_viz.core.maps import TextMaps, token_masks
from attention_viz.core.protocol import AttentionModel
from attention_viz.core.variation import Variation
from attention_viz.data.tokenizer import DEFAULT_MAX_LEN, CharTokenizer

EXTRA_DECODE_STEPS = 4  # our model may run past the text's length by this many tokens before it is stopped
REAL_NEW_TOKENS = 40  # a real model's tokens written at most, unless asked otherwise


def maps_of(model, text: str, *, scale: Scale = "sqrt_dk", causal_mask: bool = True, padding_mask: bool = True,
            max_new_tokens: int | None = None) -> TextMaps:
    """Every map of `text` through `model` (ours or a real one) with its tokens and masks, batch element 0.

    A greedy decode of up to max_new_tokens (default: ours len(text) + 5, a real model 40; one pass for an encoder). The settings it ran with are kept on the result (figures write them).
    A model of another modality takes what it reads in place of the text (a picture, a recording): its source tokens
    are its special tokens and patches, or its positions' times (hub.text_run.run_media).
    """
    if not isinstance(model, AttentionModel):  # core.protocol: ours, or a real model
        raise ValueError(f"expected an attention_viz Transformer or a real model from load_pretrained, got "
                         f"{type(model).__name__}")
    if getattr(model, "modality", None) is not None:  # a picture or a recording (hub.images, hub.speech)
        return _media_maps(model, text, Variation(scale, causal_mask, padding_mask), max_new_tokens)
    if not isinstance(text, str) or not text:
        raise ValueError("the text must be a non-empty string")
    variation = Variation(scale, causal_mask, padding_mask)  # checked before any work
    settings = {"text": text, "scale": str(scale), "causal mask": "on" if causal_mask else "off",
                "padding mask": "on" if padding_mask else "off"}
    if model.pretrained:
        from attention_viz.hub.text_run import run_text  # the hub extra: a real model means it is installed

        run = run_text(model, text, max_new_tokens=max_new_tokens or REAL_NEW_TOKENS, variation=variation)
        return TextMaps(run.maps, model.input_axis(run.src_tokens), run.tgt_tokens, run.masks, run.output,
                        {"model": model.name, **settings})
    tok = CharTokenizer(max_len=max(DEFAULT_MAX_LEN, len(text)))
    device = next(model.parameters()).device
    src = torch.tensor([tok.encode(text).ids], device=device)  # (1, S)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            generated, maps = model.greedy_decode(src, max_new_tokens or len(text) + 1 + EXTRA_DECODE_STEPS,
                                                  variation=variation)
    finally:
        model.train(was_training)
    out_ids = generated[0].tolist()
    source, target = tok.tokens(src[0].tolist()), tok.tokens([model.start_id] + out_ids[:-1])
    return TextMaps(maps, model.input_axis(source), target, token_masks(source, target, causal_mask, padding_mask),
                    tok.decode(out_ids), {"model": "attention_viz Transformer", **settings})


def _media_maps(model, source, variation: Variation, max_new_tokens: int | None) -> TextMaps:
    """maps_of a picture through an image model, or a recording through Whisper: its tokens, masks, transcript."""
    from attention_viz.hub.text_run import run_media  # the hub extra: a real model means it is installed

    run = run_media(model, source, max_new_tokens=max_new_tokens or REAL_NEW_TOKENS, variation=variation)
    settings = {"model": model.name, "input": f"a {model.modality.probed[:-1]}", "scale": str(variation.scale),
                "causal mask": "on" if variation.causal_mask else "off"}
    return TextMaps(run.maps, run.src_tokens, run.tgt_tokens, run.masks, run.output, settings)
