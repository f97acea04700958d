"""Images as a vision encoder reads them (ViT, DeiT, BEiT and Data2VecVision, DINOv2, the vision towers of CLIP and
SigLIP): a picture read within limits, made into pixels by the model's own image processor (transformers'), and the
tokens its encoder attends over: the special tokens first (class, distillation, registers), then the patches, row by
row.

    patches = Patches.of(model.config, processor)
    pixels, note = patches.read("cat.jpg")             # [1, C, H, W], what model.forward takes for an image model
    patches.tokens()                                   # ["[CLS]", "patch 0,0", "patch 0,1", ...]: the maps' axes

This module is the image modality whole: everything after the pixels is the path text takes (one model, one pass,
the maps under `encoder.{i}.self_attn`, [B, H, T, T] with T = specials + patches).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attention_viz.core.maps import InputAxis

MAX_PIXELS = 40_000_000  # a picture with more is refused from its header, before it is decoded (~120 MB as RGB)
MAX_BYTES = 64 * 2**20   # an encoded file larger than this is refused before it is opened

# model_type -> the labels of the tokens before the patches ("registers" stands for DINOv2's register tokens)
SPECIALS = {
    "vit": ("[CLS]",),
    "deit": ("[CLS]", "[DIST]"),  # the class token, then the distillation token
    "beit": ("[CLS]",),
    "data2vec-vision": ("[CLS]",),  # BEiT's architecture, trained by data2vec
    "dinov2": ("[CLS]",),
    "dinov2_with_registers": ("[CLS]", "registers"),
    "clip_vision_model": ("[CLS]",),
    "siglip_vision_model": (),  # no class token: a pooling head of its own attends over the patches
}
TOWERS = {"clip": "clip_vision_model", "siglip": "siglip_vision_model"}  # a two-tower model -> its vision tower


class ImageRefusedError(ValueError):
    """A file or value that is not a picture the model can read; its message names the limit or the fault."""


def vision_config(config):
    """The config of the vision encoder a config describes (a two-tower model's vision tower), or None when it
    describes no model this module reads."""
    model_type = getattr(config, "model_type", None)
    if model_type in TOWERS:
        return config.vision_config
    return config if model_type in SPECIALS else None


def is_vision(raw: dict) -> bool:
    """Whether a config.json, as read, describes a vision encoder this module reads."""
    return raw.get("model_type") in SPECIALS or raw.get("model_type") in TOWERS


def model_class(config):
    """The transformers class to build: a two-tower model's vision tower alone, an image classifier where the
    checkpoint is one (its head's logits are the output), else the base model."""
    from transformers import AutoModel, AutoModelForImageClassification
    from transformers.models.auto import modeling_auto as auto

    tower = TOWERS.get(config.model_type)
    if tower is not None:
        import transformers

        return getattr(transformers, auto.MODEL_MAPPING_NAMES[tower])
    if auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES.get(config.model_type) in set(config.architectures or []):
        return AutoModelForImageClassification
    return AutoModel


@dataclass(frozen=True)
class Patches:
    """How a vision encoder cuts a picture into tokens."""

    input_name = "pixel_values"  # the model's keyword for what read() gives
    probed = "pictures"          # what the proof on load runs it on (seeded random pixels)

    processor: object            # transformers' image processor of the checkpoint
    size: tuple[int, int]        # the pixels (height, width) the model reads
    patch: int                   # the side of a square patch, in pixels
    channels: int
    specials: tuple[str, ...]    # the labels of the tokens before the patches

    @classmethod
    def of(cls, config, processor) -> Patches:
        """From the vision encoder's config (vision_config's) and its image processor: the size is what the processor
        makes of a picture (DINOv2's crops 224 px where its config says 518: its position embeddings are
        interpolated to the grid, as transformers does for it)."""
        from PIL import Image

        size = tuple(processor(images=Image.new("RGB", (32, 32)), return_tensors="pt")["pixel_values"].shape[-2:])
        patch = config.patch_size if isinstance(config.patch_size, int) else config.patch_size[0]
        specials = SPECIALS[config.model_type]
        if "registers" in specials:
            registers = tuple(f"[REG{i}]" for i in range(int(config.num_register_tokens)))
            specials = tuple(label for s in specials for label in (registers if s == "registers" else (s,)))
        return cls(processor, (int(size[0]), int(size[1])), int(patch), int(config.num_channels), specials)

    @property
    def grid(self) -> tuple[int, int]:
        """Patches per column and per row."""
        return self.size[0] // self.patch, self.size[1] // self.patch

    @property
    def length(self) -> int:
        """The tokens the encoder attends over: specials + patches."""
        return len(self.specials) + self.grid[0] * self.grid[1]

    def tokens(self) -> list[str]:
        """Each token's label, in the encoder's order: the specials, then "patch row,column" row by row."""
        rows, columns = self.grid
        return [*self.specials, *(f"patch {r},{c}" for r in range(rows) for c in range(columns))]

    def axis(self) -> InputAxis:
        """The encoder's positions as core's input axis: its tokens' labels and the patch grid."""
        return InputAxis("patches", tuple(self.tokens()), grid=self.grid)

    def probe(self, batch: int, device, dtype=torch.float32) -> torch.Tensor:
        """Seeded pixels [batch, C, H, W] of unit scale, for the proof on load."""
        generator = torch.Generator().manual_seed(0)
        return torch.randn(batch, self.channels, *self.size, generator=generator).to(device=device, dtype=dtype)

    def read(self, image) -> tuple[torch.Tensor, str]:
        """A picture (PIL image, or anything read_image reads) -> (pixel_values [1, C, H, W], as the model's processor
        resizes and normalises it; a note of what that did to it)."""
        image = read_image(image)
        pixels = self.processor(images=image, return_tensors="pt")["pixel_values"]  # (1, C, H, W)
        note = (f"The {image.size[0]} x {image.size[1]} picture is read at {self.size[1]} x {self.size[0]} pixels, "
                f"as the model's image processor makes it." if image.size != (self.size[1], self.size[0]) else "")
        frames = image.info.get("frames", 1)  # an animation's (read_image): its first frame is read
        if frames > 1:
            note = f"The picture is an animation: its first frame of {frames} is read. {note}".rstrip()
        return pixels, note

    def seen(self, pixel_values: torch.Tensor) -> np.ndarray:
        """The picture as the model reads it, pixel_values [C, H, W] or [1, C, H, W] with the processor's
        normalisation undone -> [H, W, 3] uint8 (what an overlay is drawn on: patch for patch where the model saw it)."""
        values = pixel_values.detach().float().cpu().reshape(-1, *pixel_values.shape[-2:])[:3]  # (C, H, W)
        mean = torch.tensor(getattr(self.processor, "image_mean", None) or [0.0] * 3).view(-1, 1, 1)
        std = torch.tensor(getattr(self.processor, "image_std", None) or [1.0] * 3).view(-1, 1, 1)
        if getattr(self.processor, "do_normalize", True):
            values = values * std + mean
        scale = 1.0 / getattr(self.processor, "rescale_factor", 1 / 255) if getattr(self.processor, "do_rescale",
                                                                                   True) else 1.0
        return (values * scale).clamp(0, 255).round().to(torch.uint8).permute(1, 2, 0).numpy()

    def check(self, pixel_values: torch.Tensor) -> None:
        """ValueError naming the shape expected unless pixel_values is [B, C, H, W] of this model's size."""
        expected = (self.channels, *self.size)
        if (not isinstance(pixel_values, torch.Tensor) or pixel_values.dim() != 4
                or tuple(pixel_values.shape[1:]) != expected or not pixel_values.is_floating_point()):
            shape = tuple(pixel_values.shape) if isinstance(pixel_values, torch.Tensor) else type(pixel_values).__name__
            raise ValueError(f"an image model takes pixel_values of shape [B, {expected[0]}, {expected[1]}, "
                             f"{expected[2]}] (floats, as model.encode(picture).ids[None] gives them), got {shape}")


def read_image(source):
    """A picture as an RGB PIL image (an animation's first frame, its info["frames"] how many it has), from a PIL
    image, an array [H, W] or [H, W, 3 or 4] of uint8, a file path or the file's bytes; ImageRefusedError naming the fault for a file that is not a picture, a corrupt one, or one past
    MAX_PIXELS (checked from its header, before it is decoded) or MAX_BYTES."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(source, Image.Image):
        image = source
    elif isinstance(source, np.ndarray):
        if source.dtype != np.uint8 or source.ndim not in (2, 3) or source.ndim == 3 and source.shape[2] not in (3, 4):
            raise ImageRefusedError(f"an image array must be uint8 [H, W] or [H, W, 3 or 4]; got {source.dtype} "
                                    f"{list(source.shape)}")
        image = Image.fromarray(source)
    else:
        if isinstance(source, (str, Path)):
            path = Path(source)
            if not path.is_file():
                raise ImageRefusedError(f"no picture file at {path.name!r}")
            if path.stat().st_size > MAX_BYTES:
                raise ImageRefusedError(f"the file {path.name!r} is {path.stat().st_size / 2**20:.0f} MiB; a picture "
                                        f"is read up to {MAX_BYTES // 2**20} MiB")
            data = path.read_bytes()
        elif isinstance(source, (bytes, bytearray)):
            data = bytes(source)
            if len(data) > MAX_BYTES:
                raise ImageRefusedError(f"the file is {len(data) / 2**20:.0f} MiB; a picture is read up to "
                                        f"{MAX_BYTES // 2**20} MiB")
        else:
            raise ImageRefusedError(f"a picture is a PIL image, an array, a file path or its bytes; got "
                                    f"{type(source).__name__}")
        try:
            image = Image.open(io.BytesIO(data))  # reads the header only
        except Image.DecompressionBombError:
            raise ImageRefusedError(f"the picture has more pixels than PIL will decode safely; pictures are read up to "
                                    f"{MAX_PIXELS / 1e6:.0f} megapixels: scale it down first") from None
        except (UnidentifiedImageError, OSError, ValueError):
            raise ImageRefusedError("the file is not a picture (PNG, JPEG, WebP, GIF, BMP or TIFF) that can be "
                                    "read") from None
    width, height = image.size
    if width * height > MAX_PIXELS:
        raise ImageRefusedError(f"the picture is {width:,} x {height:,} pixels ({width * height / 1e6:.0f} megapixels); "
                                f"pictures are read up to {MAX_PIXELS / 1e6:.0f} megapixels: scale it down first")
    try:
        if image.mode.startswith("I;16") or image.mode == "I":  # 16-bit grey (PIL's convert would clip it at 255)
            grey = np.asarray(image, dtype=np.float64) / 257  # decodes it: 0..65535 -> 0..255, as a viewer shows it
            picture = Image.fromarray(np.clip(np.rint(grey), 0, 255).astype(np.uint8), "L").convert("RGB")
        else:
            picture = image.convert("RGB")  # decodes it (an animation's first frame)
        picture.info["frames"] = getattr(image, "n_frames", None) or image.info.get("frames", 1)  # Patches.read says
        return picture
    except (OSError, ValueError, Image.DecompressionBombError):
        raise ImageRefusedError("the picture is damaged: its data ends or breaks before the image does") from None
