"""The guided lesson's steps on pictures (where the server has an image model: service.media_view): where a ViT's
class token looks in its last layer, and what taking 1/√d_k out does to those rows. Each step is a state of the
Pictures and sound tab (its model, scaling, layer, head and token, and the views they draw, on the sample picture)
with the numbers of exactly that view.

    step = image_step(lesson, step, scaled=True)   # LessonStep with .media: model, scale, layer, head, query, answer
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from attention_viz.core.maps import head_statistics
from attention_viz.service.real_models import display_name
from attention_viz.service.texts import code

IMAGE_TITLE = "Where a picture's class token looks"
IMAGE_UNSCALED_TITLE = "Take the 1/√d_k out of a vision Transformer"
NO_IMAGE_TITLE = "Pictures: no image model can be had now"


def image_model(lesson) -> str | None:
    """The first image model set up here that can be had now (loading it if need be), None when none."""
    for key in lesson.views.media.picture_keys:
        try:
            lesson.views.media.model(key)
        except ValueError:
            continue  # not loadable now: the next one
        return key
    return None


def image_step(lesson, step, scaled: bool):
    """Where the class token looks (scaled), or the same rows with the 1/√d_k taken out (not scaled)."""
    media = lesson.views.media
    key = image_model(lesson)
    if key is None:
        names = ", ".join(code(display_name(k)) for k in media.picture_keys)
        return replace(step, title=NO_IMAGE_TITLE, tab="media",
                       text=f"This server is set up with image models ({names}), but none can be had now: picking "
                            "one in the Pictures and sound tab says why. The lesson's other steps stand.")
    model, sample = media.model(key), media.sample()
    layer = media.shape(key)[0] - 1
    first = len(model.modality.specials)  # the first patch's index
    if first == 0:  # SigLIP's tower: no class token; its first patch stands in
        looks = "the first patch"
    else:
        looks = f"the class token {code(model.modality.specials[0])}"
    rows = {scale: media.run(key, sample, scale).maps[f"encoder.{layer}.self_attn"][:, 0] for scale in
            ("sqrt_dk", "none")}  # (H, T): the first token's row in each head
    stats = {scale: head_statistics(row[:, None, :]) for scale, row in rows.items()}  # each (H,)
    head = int(np.argmin(stats["sqrt_dk"]["entropy"]))  # the head that looks most sharply, with 1/√d_k
    row = rows["sqrt_dk"][head]
    patch = first + int(np.argmax(row[first:]))
    grid, size = model.modality.grid, model.modality.patch
    scale = "sqrt_dk" if scaled else "none"
    answer = media.view(key, sample, scale, 1.0, layer, head, 0)
    name = code(display_name(key))
    if scaled:
        text = (f"A vision Transformer reads a picture as tokens: {name} cuts the sample picture into {grid[0]} x "
                f"{grid[1]} patches of {size} px, each a token, after its special tokens. Nothing in Eq. 1 changes: "
                f"every token's query meets every token's key. In the last layer, {layer}, {looks} of head {head} "
                f"looks most sharply (its row's entropy {stats['sqrt_dk']['entropy'][head]:.2f} nats, where an even "
                f"spread would be {np.log(row.size):.2f}): it puts {row[first:].sum():.2f} of its weight on the "
                f"patches, the most, {row[patch]:.3f}, on {code(model.modality.tokens()[patch])}, drawn over the "
                "picture in the first view. The grid shows every head of the layer from the same token, the table "
                "under it the weight each keeps on the special tokens, which have no place in the picture, and the "
                "rollout follows the weight through every layer. **Click a patch** to see where it looks.")
    else:
        sharper = stats["none"]["entropy"] < stats["sqrt_dk"]["entropy"]
        text = (f"The same picture and layer on {name}, run without the 1/√d_k it was trained with (d_k = "
                f"{model.d_k}): every logit grows √{model.d_k} ≈ {np.sqrt(model.d_k):.1f} times, and the softmax "
                f"sharpens. The rows of {looks} in layer {layer}, head by head, from entropy "
                f"{', '.join(f'{e:.2f}' for e in stats['sqrt_dk']['entropy'])} nats to "
                f"{', '.join(f'{e:.2f}' for e in stats['none']['entropy'])} ({int(sharper.sum())} of "
                f"{sharper.size} heads sharper); head {head}'s largest weight goes from "
                f"{stats['sqrt_dk']['max_weight'][head]:.3f} to {stats['none']['max_weight'][head]:.3f}. Where a row "
                "sharpens, its map in the first view narrows to fewer patches: footnote 4's argument, in a model that "
                "reads pictures. Switch the scaling back to compare.")
    return replace(step, tab="media", text=text,
                   media={"model": key, "picture": sample, "scale": scale, "layer": layer, "head": head,
                          "query": 0, "answer": answer})
