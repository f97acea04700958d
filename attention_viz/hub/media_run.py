"""One picture or recording through a real model (hub.images, hub.speech), as the views need it: the encoder's
tokens (specials and patches, or times), every map, the masks it applied and, for Whisper, the transcript written
greedily with the decoder's rows (its prompt as generate writes it, then what it wrote but the last).

    run = run_media(model, "cat.jpg", Variation("none"))
    run.maps["encoder.3.self_attn"]          # [H, T, T] float32; T = specials + patches
    run.source, run.target, run.output       # the maps' axes; Whisper's transcript

Axes: H heads, Q query positions, K key positions; T the encoder's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from attention_viz.core.maps import InputAxis, kind_of
from attention_viz.core.variation import Variation


@dataclass(frozen=True)
class MediaRun:
    """What one pass of a picture or a recording gives the views."""

    inputs: torch.Tensor = field(repr=False)           # what the model read: [1, C, H, W] pixels, [1, mels, frames]
    axis: InputAxis                                    # the encoder's positions: patches (a grid) or frames (times)
    source: tuple[str, ...]                            # their labels (specials, patches; or times)
    target: tuple[str, ...]                            # the decoder's rows: Whisper's prompt and what it wrote, ()
    written: tuple[str, ...]                           # the tokens written (the end token included when written)
    output: str                                        # the transcript, special tokens left out ("" for a picture)
    maps: dict[str, np.ndarray] = field(repr=False)    # key -> [H, Q, K] float32
    masks: dict[str, np.ndarray] = field(repr=False)   # kind ("encoder.self_attn") -> [Q, K] bool, as applied
    note: str = ""                                     # what reading it changed (resized, cut to the window)


def run_media(model, source, variation: Variation, max_new_tokens: int = 40) -> MediaRun:
    """A picture through an image model (one pass), or a recording through Whisper (its transcript written greedily,
    the last full pass's maps): the modality's refusals (a ValueError) name the fault."""
    encoding = model.encode(source)
    inputs = encoding.ids[None].to(model.device)  # (1, C, H, W) or (1, mels, frames)
    with torch.inference_mode():
        if not model.abilities.writes_text:
            recorded, target, output, written = model.traced(inputs, variation=variation), [], "", []
        else:
            ids, recorded = model.greedy_pass(inputs, max_new_tokens, variation=variation)
            out = ids[0].tolist()
            rows = recorded.maps[model.map_keys[-1]].size(-2)  # the decoder's input: its prompt and all but the last
            encoded = model.model.get_encoder()(**{model.modality.input_name: inputs})
            start = torch.tensor([[model.start_id]], device=model.device)
            prompt = model.modality.prompt(model.model, encoded, start)[0].tolist()
            target, output, written = model.pieces((prompt + out)[:rows]), model.decode(out), model.pieces(out)
    maps = {key: value[0].float().cpu().numpy() for key, value in recorded.maps.items()}
    masks = {kind_of(key): torch.broadcast_to(mask, (1, 1, *maps[key].shape[-2:]))[0, 0].cpu().numpy()
             for key, mask in recorded.run.masks.items() if mask is not None}
    return MediaRun(inputs.cpu(), model.input_axis(), tuple(encoding.tokens), tuple(target), tuple(written), output,
                    maps, masks, encoding.note)
