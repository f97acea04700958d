"""Pictures and recordings in the app, through gradio_client: a server set up with a tiny DeiT, a tiny Whisper and a
tiny Marian (tests/e2e/conftest.py's media_app). The files go up through Gradio's upload route; every bad one is
refused with a sentence naming the fault or the limit, and no trace."""

from __future__ import annotations

import base64
import io
import re
import struct
import zlib

import httpx
import numpy as np
import pytest

pytest.importorskip("transformers")

import soundfile  # noqa: E402
from gradio_client import Client, handle_file  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402
from PIL import Image  # noqa: E402

from attention_viz.service.limits import MEDIA_UPLOAD_BYTES  # noqa: E402


@pytest.fixture(scope="module")
def media(media_app):
    base, log, root = media_app
    return Client(base + "/", verbose=False), log, root


OUTPUTS = ("overlay", "heads", "rollout", "specials", "alignment", "encoder", "notes", "query", "layer", "head")


def view(client, model, picture=None, recording=None, scale="sqrt_dk", factor=1.0, layer=1, head=0, query=0):
    """/media_view's answer by its outputs' names."""
    answer = client.predict(model, picture and handle_file(str(picture)), recording and handle_file(str(recording)),
                            scale, factor, layer, head, query, api_name="/media_view")
    return dict(zip(OUTPUTS, answer))


def config(client) -> dict:
    return httpx.get(client.src.rstrip("/") + "/config").json()


def wav(path, seconds: float, rate: int = 16000):
    t = np.arange(int(seconds * rate)) / rate
    soundfile.write(path, (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), rate)
    return path


def png_header_only(path, width: int, height: int):
    """A PNG whose header says width x height and whose data is a stub: read_image refuses it from the header."""
    body = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", body) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))
    return path


def test_the_tab_offers_the_models_that_read_pictures_and_sound_and_the_transformer_tab_the_others(media):
    client, log, _ = media
    components = {c.get("props", {}).get("elem_id"): c["props"] for c in config(client)["components"]}
    assert [v for _, v in components["media_model"]["choices"]] == ["hub:tiny-deit", "hub:tiny-whisper"]
    text_models = [v for _, v in components["model"]["choices"] if v.startswith("hub:")]
    assert text_models == ["hub:tiny-marian"]  # an image model or Whisper would refuse a text
    assert components["media_picture"]["value"] is not None  # the sample picture, offered as the first input
    assert str(log.parent) not in str(components["media_model"]["choices"])  # no server path on the page


def test_a_picture_shows_a_head_every_head_the_rollout_and_the_special_tokens_apart(media, tmp_path):
    client, _, _ = media
    picture = tmp_path / "scene.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 80, 3), dtype=np.uint8)).save(picture)
    answer = view(client, "hub:tiny-deit", picture=picture, layer=1, head=2, query=0)
    overlay, rollout, heads, specials, notes = (answer[k] for k in ("overlay", "rollout", "heads", "specials", "notes"))
    assert Image.open(overlay).size == (448, 448)  # 32 px zoomed 14 times: a click finds its patch
    assert Image.open(heads).size[0] > 400 and Image.open(rollout).size[0] > 200
    assert "[CLS]" in specials and "[DIST]" in specials and "every patch" in specials
    assert "4 x 4 patches" in notes and "d_k = 8" in notes and "80 x 64 picture" in notes
    # the class token's weights on the two specials and the patches sum to 1 for every head
    rows = [[float(x) for x in re.findall(r"\d\.\d{3}", line)] for line in specials.split("<tr>")[2:]]
    assert len(rows) == 4 and all(abs(sum(row) - 1) < 3e-3 for row in rows)


def test_a_patch_looks_elsewhere_than_the_class_token_and_unscaled_attention_is_sharper(media):
    client, _, _ = media
    sample = config(client)
    sample = next(c["props"]["value"]["path"] for c in sample["components"]
                  if c.get("props", {}).get("elem_id") == "media_picture")
    # the page's own copy of the sample, as the browser sends it back
    def ask(scale="sqrt_dk", query=0):
        answer = client.predict("hub:tiny-deit", {"path": sample, "meta": {"_type": "gradio.FileData"}}, None, scale,
                                1.0, 1, 0, query, api_name="/media_view")
        return dict(zip(OUTPUTS, answer))

    from_class, from_patch = ask(query=0), ask(query=7)  # 7: the specials' 2, then patch (1, 1) of the 4 x 4 grid
    assert from_class["overlay"] != from_patch["overlay"] and "from <strong>patch 1,1</strong>" in from_patch["notes"]
    assert "from <strong>[CLS]</strong>" in from_class["notes"] and from_patch["query"] == 7
    unscaled = ask(scale="none")
    assert "off (plain q·k)" in unscaled["notes"] and unscaled["specials"] != from_class["specials"]


def long_view_call(client, asked: dict) -> dict:
    """The encoder's long view's server function, as the page calls it (POST /component_server)."""
    component = next(c["id"] for c in config(client)["components"]
                     if c.get("props", {}).get("elem_id") == "media_encoder")
    answer = httpx.post(client.src.rstrip("/") + "/gradio_api/component_server/", json={
        "data": asked, "component_id": component, "fn_name": "long_view", "session_hash": "media-test"}, timeout=30)
    assert answer.status_code == 200
    return answer.json()


def test_a_recording_is_transcribed_and_aligned_and_a_long_one_is_cut_saying_so(media, tmp_path):
    client, _, _ = media
    answer = view(client, "hub:tiny-whisper", recording=wav(tmp_path / "tone.wav", 0.5))
    alignment, encoder, notes = answer["alignment"], answer["encoder"], answer["notes"]
    assert Image.open(alignment).size[1] > Image.open(alignment).size[0] * 0.8  # a row per written token
    assert encoder["kind"] == "long" and encoder["length"] == 600 and encoder["overview"]["side"] == 300
    assert notes.startswith("<p><strong>Transcript</strong>") and "600 encoder positions of 20 ms" in notes
    assert "Read the first" not in notes
    long = view(client, "hub:tiny-whisper", recording=wav(tmp_path / "long.wav", 7200, rate=1000))  # two hours
    assert "Read the first 12.0 s of the recording's 2:00:00" in long["notes"]


def test_a_region_of_the_encoders_map_is_its_exact_weights_over_the_times(media, tmp_path):
    """The encoder's self-attention as the Long text tab's view: /media_view answers its payload (the times as its
    labels, the chosen head's overview in blocks of 2 x 2), and a region asked as the page asks it is the weights of
    one pass of the same model in memory (this process's), to float32 rounding, under the run's scaling."""
    import torch

    from attention_viz.core.variation import Variation
    from attention_viz.hub import load_pretrained

    client, _, root = media
    recording = wav(tmp_path / "tone.wav", 3.0)
    encoder = view(client, "hub:tiny-whisper", recording=recording, scale="custom", factor=0.25, layer=1,
                   head=3)["encoder"]
    assert encoder["pieces"][:3] == ["0.00 s", "0.02 s", "0.04 s"] and encoder["words"][-1] == "11.98 s"
    assert (encoder["overview"]["key"], encoder["overview"]["head"], encoder["overview"]["block"]) == (
        "encoder.1.self_attn", 3, 2)
    asked = {"run": encoder["run"], "what": "region", "key": "encoder.1.self_attn", "head": 3, "rows": [40, 296],
             "cols": [100, 356]}
    region = long_view_call(client, asked)
    weights = np.frombuffer(base64.b64decode(region["data"]), "<f4").reshape(256, 256)
    model = load_pretrained(root / "tiny-whisper")
    with torch.no_grad():
        _, maps = model.forward(model.encode(str(recording)).ids[None], torch.tensor([[model.start_id]]),
                                variation=Variation(0.25))
    np.testing.assert_allclose(weights, maps["encoder.1.self_attn"][0, 3, 40:296, 100:356].numpy(), rtol=0,
                               atol=2e-7)
    assert "at most 256" in long_view_call(client, {**asked, "rows": [0, 300]})["error"]
    assert "read the" in long_view_call(client, {**asked, "run": "gone"})["error"]


@pytest.mark.parametrize("case", ["text as a picture", "damaged picture", "50 megapixels", "picture to Whisper",
                                  "recording to DeiT", "text as a recording", "no file", "unknown model",
                                  "layer out of range"])
def test_bad_input_is_refused_with_a_sentence_and_no_trace(media, tmp_path, case):
    client, log, _ = media
    text = tmp_path / "notes.txt"
    text.write_text("not a picture\n" * 100)
    good = tmp_path / "good.png"
    Image.new("RGB", (40, 40), (200, 30, 30)).save(good)
    damaged = tmp_path / "damaged.png"
    damaged.write_bytes(good.read_bytes()[:60])
    asks = {"text as a picture": (dict(model="hub:tiny-deit", picture=text), "not a picture"),
            "damaged picture": (dict(model="hub:tiny-deit", picture=damaged), "damaged"),
            "50 megapixels": (dict(model="hub:tiny-deit", picture=png_header_only(tmp_path / "big.png", 10000, 5000)),
                              "50 megapixels); pictures are read up to 40 megapixels"),
            "picture to Whisper": (dict(model="hub:tiny-whisper", recording=good), "This file is a picture; "
                                   "tiny-whisper reads recordings"),
            "recording to DeiT": (dict(model="hub:tiny-deit", picture=wav(tmp_path / "a.wav", 0.2)),
                                  "This file is a recording; tiny-deit reads pictures"),
            "text as a recording": (dict(model="hub:tiny-whisper", recording=text), "not a recording"),
            "no file": (dict(model="hub:tiny-whisper"), "Record or upload a recording first"),
            "unknown model": (dict(model="hub:tiny-marian", picture=good), "Unknown model"),
            "layer out of range": (dict(model="hub:tiny-deit", picture=good, layer=5), "layer")}
    kwargs, said = asks[case]
    with pytest.raises(AppError) as refused:
        view(client, **kwargs)
    assert said in str(refused.value) and "Traceback" not in str(refused.value)
    assert "Traceback" not in log.read_text()


def test_odd_pictures_are_read_as_a_viewer_shows_them(media, tmp_path):
    """A 1 x 1 picture, grey, CMYK, 16-bit grey and an animated GIF are read (the notes say what reading changed):
    16-bit grey as its 8-bit equal (its overlay the same file), an animation by its first frame, said."""
    client, _, _ = media
    rng = np.random.default_rng(5)
    pictures = {"one.png": Image.new("RGB", (1, 1), (200, 30, 30)), "cmyk.jpg": Image.new("CMYK", (50, 40), (10, 200, 30, 5)),
                "grey.png": Image.fromarray(rng.integers(0, 256, (40, 50), dtype=np.uint8), "L")}
    for name, image in pictures.items():
        answer = view(client, "hub:tiny-deit", picture=(image.save(tmp_path / name) or tmp_path / name))
        assert Image.open(answer["overlay"]).size == (448, 448) and "picture is read at 32 x 32" in answer["notes"]
    deep = rng.integers(0, 65536, (40, 50), dtype=np.uint16)
    Image.fromarray(deep).save(tmp_path / "deep.png")
    Image.fromarray(np.rint(deep / 257).astype(np.uint8), "L").save(tmp_path / "shallow.png")
    deep_view, shallow_view = (view(client, "hub:tiny-deit", picture=tmp_path / f) for f in ("deep.png", "shallow.png"))
    assert open(deep_view["overlay"], "rb").read() == open(shallow_view["overlay"], "rb").read()
    frames = [Image.new("RGB", (40, 30), colour) for colour in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:], duration=100, loop=0)
    frames[0].save(tmp_path / "first.png")
    animated, first = (view(client, "hub:tiny-deit", picture=tmp_path / f) for f in ("anim.gif", "first.png"))
    assert "an animation: its first frame of 3 is read" in animated["notes"]
    assert open(animated["overlay"], "rb").read() == open(first["overlay"], "rb").read()


def test_odd_recordings_are_heard_and_an_empty_one_is_refused(media, tmp_path):
    """0.1 s and a silent 2 s are heard (the window padded); stereo at 48 kHz is heard as its channels' mean at the
    model's 16 kHz (its encoder's map the same as that mono file's); a recording of no samples is refused."""
    client, log, _ = media
    rate = 16000
    soundfile.write(tmp_path / "short.wav", (0.3 * np.sin(np.arange(rate // 10) / 3)).astype(np.float32), rate)
    soundfile.write(tmp_path / "silent.wav", np.zeros(2 * rate, np.float32), rate)
    for name in ("short.wav", "silent.wav"):
        answer = view(client, "hub:tiny-whisper", recording=tmp_path / name)
        assert "600 encoder positions" in answer["notes"] and answer["encoder"]["length"] == 600
    t = np.arange(2 * 48000) / 48000
    stereo = np.stack([0.3 * np.sin(2 * np.pi * 440 * t), 0.2 * np.sin(2 * np.pi * 660 * t)], 1).astype(np.float32)
    soundfile.write(tmp_path / "stereo.wav", stereo, 48000, subtype="FLOAT")
    soundfile.write(tmp_path / "mono.wav", stereo.mean(axis=1), 48000, subtype="FLOAT")
    both, mono = (view(client, "hub:tiny-whisper", recording=tmp_path / f)["encoder"] for f in ("stereo.wav", "mono.wav"))
    assert both["overview"]["data"] == mono["overview"]["data"] and both["stats"] == mono["stats"]
    soundfile.write(tmp_path / "empty.wav", np.zeros(0, np.float32), rate)
    with pytest.raises(AppError, match="the recording holds no samples"):
        view(client, "hub:tiny-whisper", recording=tmp_path / "empty.wav")
    assert "Traceback" not in log.read_text()


def test_an_upload_past_the_limit_is_refused_naming_it_and_a_small_one_is_taken(media):
    client, _, _ = media
    upload = client.src.rstrip("/") + "/gradio_api/upload"
    too_big = httpx.post(upload, files={"files": ("big.wav", b"\0" * (MEDIA_UPLOAD_BYTES + 2**20), "audio/wav")},
                         timeout=60)
    assert too_big.status_code == 413 and "16 MiB" in too_big.text
    small = httpx.post(upload, files={"files": ("small.png", io.BytesIO(b"\0" * 1000), "image/png")}, timeout=60)
    assert small.status_code == 200


def test_the_explorer_page_of_a_picture_comes_back_as_one_html_file(media, tmp_path):
    client, _, _ = media
    picture = tmp_path / "red.png"
    Image.new("RGB", (50, 30), (200, 30, 30)).save(picture)
    page = client.predict("hub:tiny-deit", handle_file(str(picture)), "sqrt_dk", 1.0, api_name="/media_explorer")
    page = page["value"] if isinstance(page, dict) else page  # the file list, shown (an update)
    path = page[0] if isinstance(page, list) else page
    path = path.get("path") if isinstance(path, dict) else path
    text = open(path, encoding="utf-8").read()
    assert str(path).endswith("tiny-deit_explorer.html") and "patch 0,0" in text and "[CLS]" in text
