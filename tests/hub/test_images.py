"""Vision encoders (ViT, DeiT, BEiT, DINOv2 with and without registers, CLIP's and SigLIP's vision towers) through our
Eq. 1: loaded from a folder without a tokenizer, proven on load, every map equal to transformers' eager attention on
a real picture, the switches and heads off acting as on text, and bad pictures refused with the limit named."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
import torch

from attention_viz.hub import load_pretrained
from attention_viz.hub.images import MAX_PIXELS, ImageRefusedError, read_image
from attention_viz.hub.loading import ModelRefusedError
from devtools.hub_models import IMAGE_FAMILIES, save_tiny_image

SPECIALS = {"vit": 1, "deit": 2, "beit": 1, "data2vec-vision": 1, "dinov2": 1, "dinov2_with_registers": 5, "clip": 1, "siglip": 0}


@pytest.fixture(scope="module")
def image_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("image-models")
    return {family: save_tiny_image(family, root / family) for family in IMAGE_FAMILIES}


def picture(seed: int = 0, size=(45, 61)) -> np.ndarray:
    """A picture with structure (a gradient and a square), not noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[: size[0], : size[1]]
    image = np.stack([x * 4 % 256, y * 5 % 256, (x + y) * 2 % 256], -1).astype(np.uint8)
    image[10:25, 20:40] = rng.integers(0, 256, 3, dtype=np.uint8)
    return image


@pytest.mark.parametrize("family", list(IMAGE_FAMILIES))
def test_every_map_equals_eager_attention_on_a_picture_and_the_tokens_are_specials_then_patches(image_folders,
                                                                                                 family):
    model = load_pretrained(image_folders[family], dtype=torch.float64)
    assert model.fidelity.proven and model.fidelity.source == "pictures" and model.tokenizer is None
    assert "random pictures" in str(model.fidelity)
    encoding = model.encode(picture())
    pixels = encoding.ids[None].double()  # (1, C, H, W)
    rows, columns = model.modality.grid
    assert len(encoding.tokens) == SPECIALS[family] + rows * columns == model.modality.length
    assert encoding.tokens[SPECIALS[family]] == "patch 0,0" and encoding.tokens[-1] == f"patch {rows - 1},{columns - 1}"
    output, maps = model.forward(pixels)
    assert list(maps) == [f"encoder.{i}.self_attn" for i in range(2)]
    model.model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            eager = model.model(pixel_values=pixels, output_attentions=True)
    finally:
        model.model.set_attn_implementation("attention_viz")
    for i, theirs in enumerate(eager.attentions):
        ours = maps[f"encoder.{i}.self_attn"]
        assert ours.shape == (1, 4, model.modality.length, model.modality.length)
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)  # eager takes its softmax in float32
        torch.testing.assert_close(ours.sum(-1), torch.ones_like(ours.sum(-1)), rtol=0, atol=1e-12)
    reference = eager.logits if getattr(eager, "logits", None) is not None else eager.last_hidden_state
    torch.testing.assert_close(output, reference, rtol=0, atol=1e-5)


@pytest.mark.parametrize("family", ["vit", "dinov2_with_registers"])
def test_heads_off_equal_the_same_heads_zeroed_before_w_o_and_the_scale_switch_acts(image_folders, family):
    model = load_pretrained(image_folders[family], dtype=torch.float64)
    pixels = model.encode(picture(1)).ids[None].double()
    base, maps = model.forward(pixels)
    off = {"encoder.0.self_attn": [1, 3], "encoder.1.self_attn": [0]}
    ours, off_maps = model.forward(pixels, heads_off=off)
    d = model.d_k
    handles = []
    for key, heads in off.items():
        w_o = model._w_o[key][0]

        def zero(module, args, heads=heads):
            x = args[0].clone()
            for h in heads:
                x[..., h * d:(h + 1) * d] = 0.0
            return (x,)
        handles.append(w_o.register_forward_pre_hook(zero))
    try:
        with torch.no_grad():
            theirs = model.model(pixel_values=pixels).last_hidden_state
    finally:
        for handle in handles:
            handle.remove()
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-10)
    assert not torch.allclose(ours, base)
    torch.testing.assert_close(off_maps["encoder.0.self_attn"], maps["encoder.0.self_attn"], rtol=0, atol=0)
    _, unscaled = model.forward(pixels, scale="none")  # QKᵀ unscaled: every row sharper than with 1/√d_k
    entropy = {name: -(m * m.clamp_min(1e-300).log()).sum(-1).mean() for name, m in
               (("scaled", maps["encoder.0.self_attn"]), ("unscaled", unscaled["encoder.0.self_attn"]))}
    assert entropy["unscaled"] < entropy["scaled"]


def test_pixels_of_another_size_or_text_inputs_are_refused_naming_the_shape(image_folders):
    model = load_pretrained(image_folders["vit"])
    with pytest.raises(ValueError, match=r"pixel_values of shape \[B, 3, 32, 32\].*got \(1, 3, 16, 16\)"):
        model.forward(torch.zeros(1, 3, 16, 16))
    with pytest.raises(ValueError, match=r"got \(1, 5\)"):
        model.forward(torch.tensor([[1, 2, 3, 4, 5]]))


def test_an_image_folder_without_its_processor_settings_is_refused(image_folders, tmp_path):
    import shutil

    folder = tmp_path / "no-processor"
    shutil.copytree(image_folders["deit"], folder)
    (folder / "preprocessor_config.json").unlink()
    with pytest.raises(ModelRefusedError, match="no preprocessor_config.json"):
        load_pretrained(folder)


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature and header chunk claiming width x height, and a truncated image data chunk."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def test_bad_pictures_are_refused_with_the_fault_or_the_limit_named(tmp_path):
    from PIL import Image

    with pytest.raises(ImageRefusedError, match="not a picture"):
        read_image(b"%PDF-1.4 not a picture at all")
    with pytest.raises(ImageRefusedError, match="megapixels"):  # 8,000 x 6,500: refused from its header alone
        read_image(png_header(8000, 6500))
    assert 8000 * 6500 > MAX_PIXELS
    good = io.BytesIO()
    Image.fromarray(picture()).save(good, format="PNG")
    with pytest.raises(ImageRefusedError, match="damaged"):
        read_image(good.getvalue()[: len(good.getvalue()) // 2])
    with pytest.raises(ImageRefusedError, match="uint8"):
        read_image(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(ImageRefusedError, match="no picture file"):
        read_image(tmp_path / "absent.png")
    path = tmp_path / "ok.png"
    path.write_bytes(good.getvalue())
    assert read_image(path).size == (61, 45) and read_image(good.getvalue()).mode == "RGB"


def test_a_16_bit_grey_picture_reads_at_its_full_scale_and_an_animation_by_its_first_frame_said(image_folders):
    """16-bit grey (PNG's I;16) read as a viewer shows it, 0..65535 onto 0..255 (PIL's convert clipped it at 255: a
    nearly white picture); an animated GIF read by its first frame, the note saying how many it has."""
    from PIL import Image

    grey = np.random.default_rng(3).integers(0, 65536, (30, 40), dtype=np.uint16)
    wide = io.BytesIO()
    Image.fromarray(grey).save(wide, format="PNG")
    assert Image.open(io.BytesIO(wide.getvalue())).mode.startswith("I")
    read = np.asarray(read_image(wide.getvalue()))
    expected = np.rint(grey / 257).astype(np.uint8)
    np.testing.assert_array_equal(read, np.repeat(expected[..., None], 3, axis=2))
    frames = [Image.fromarray(picture(seed)) for seed in range(3)]
    animation = io.BytesIO()
    frames[0].save(animation, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    first = Image.open(io.BytesIO(animation.getvalue())).convert("RGB")
    np.testing.assert_array_equal(np.asarray(read_image(animation.getvalue())), np.asarray(first))
    model = load_pretrained(image_folders["deit"])
    note = model.encode(animation.getvalue()).note
    assert note.startswith("The picture is an animation: its first frame of 3 is read. The 61 x 45 picture"), note
    assert "animation" not in model.encode(wide.getvalue()).note
    assert "first frame of 3" in model.encode(read_image(animation.getvalue())).note  # read once, then encoded


def test_the_picture_the_model_read_comes_back_from_its_pixels_and_an_overlay_is_drawn_on_it(image_folders, tmp_path):
    import attention_viz as av
    from PIL import Image

    model = load_pretrained(image_folders["deit"])
    image = picture(2)
    encoding = model.encode(image)
    seen = model.modality.seen(encoding.ids)
    resized = np.asarray(Image.fromarray(image).resize((32, 32), Image.BILINEAR))
    assert seen.shape == (32, 32, 3) and np.abs(seen.astype(int) - resized.astype(int)).max() <= 1
    _, maps = model.forward(encoding.ids[None])
    path = av.save_overlay(seen, av.rollout(maps)[0], model.modality, tmp_path / "rollout.svg")
    assert "[DIST]" in path.read_text()  # the specials' weights named as text


def test_show_draws_a_pictures_maps_over_its_patches(image_folders):
    import attention_viz as av

    model = load_pretrained(image_folders["dinov2_with_registers"])
    view = av.show(model, picture(3))
    tokens = view.payload["tokens"]["source"]
    assert tokens[:5] == ["[CLS]", "[REG0]", "[REG1]", "[REG2]", "[REG3]"] and tokens[5] == "patch 0,0"
    axis = model.input_axis()  # the patches as an axis: its labels the payload's, its grid the payload's too
    assert axis.name == "patches" and list(axis.labels) == tokens and axis.grid == model.modality.grid
    assert view.payload["source_axis"] == {"name": "patches", "grid": list(model.modality.grid)}
    assert "random pictures" in " ".join(view.payload["notes"]) and view.payload["tokens"]["target"] == []


def test_the_long_pass_reads_a_picture_every_map_as_in_memory(tmp_path):
    """model.long_run(picture): an image model's every map through the long pass (blocks of 16 query rows), its
    summaries, regions and overviews equal to one pass in memory; its output the model's own."""
    from tests.hub.test_long import assert_long_equals

    model = load_pretrained(save_tiny_image("deit", tmp_path / "deit", image_size=64), dtype=torch.float64)
    run = model.long_run(picture(2), rows=16)
    output, maps = model.forward(model.encode(picture(2)).ids[None].double())
    assert run.length == run.given == model.modality.length == 66 and run.reads == ""
    assert "picture is read at 64 x 64" in run.note
    torch.testing.assert_close(run.logits, output, rtol=1e-9, atol=1e-9)
    assert_long_equals(run, dict(maps), size=5)


def test_pattern_scores_and_save_figure_on_a_pictures_maps(image_folders, tmp_path):
    """maps_of(model, picture): the picture's maps with its tokens; their pattern scores are the weight on the class
    token (first) and on the previous patch in reading order, by hand; duplicate and induction count nothing (no
    token repeats); pattern_scores(model) says why it cannot draw random tokens; save_figure writes the tokens."""
    import attention_viz as av

    model = load_pretrained(image_folders["deit"], dtype=torch.float64)
    run = av.maps_of(model, picture(3))
    assert run.source_tokens[:3] == ["[CLS]", "[DIST]", "patch 0,0"] and run.target_tokens == []
    assert run.settings["input"] == "a picture" and run.settings["model"] == model.name
    _, maps = model.forward(model.encode(picture(3)).ids[None].double())
    scores = av.pattern_scores(run)
    assert list(scores.scores) == ["encoder.self_attn"]
    for i in range(2):
        weights = maps[f"encoder.{i}.self_attn"][0].detach().numpy()  # (H, T, T)
        np.testing.assert_allclose(scores.scores["encoder.self_attn"]["first"][i], weights[:, :, 0].mean(-1),
                                   rtol=1e-6)
        previous = np.stack([np.diagonal(w, -1).mean() for w in weights])
        np.testing.assert_allclose(scores.scores["encoder.self_attn"]["previous"][i], previous, rtol=1e-6)
    for pattern in ("duplicate", "induction"):
        assert np.isnan(scores.scores["encoder.self_attn"][pattern]).all()
    with pytest.raises(ValueError, match=r"reads pictures, not random tokens.*pattern_scores\(maps_of\(model, "
                                         r"picture\)\)"):
        av.pattern_scores(model)
    path = av.save_figure(run, "encoder.1.self_attn", 0, tmp_path / "head.svg")
    svg = path.read_text()
    assert "patch 3,3" in svg and "[DIST]" in svg and "a picture" in svg
