"""The Pictures and sound tab's service (service.media_view) and what it draws with (draw.overlay.overlay_pixels): on
tiny real-format models saved offline (a DeiT, a Whisper, a Marian; a Whisper hearing 12 s, 600 positions, for the
encoder's long view)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

import soundfile  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from attention_viz.core.variation import Variation  # noqa: E402
from attention_viz.draw.overlay import ALPHA, MARK_RGB, overlay_pixels  # noqa: E402
from attention_viz.draw.raster import colormap_lut  # noqa: E402
from attention_viz.hub.text_run import run_media  # noqa: E402
from attention_viz.service.catalog import Catalog  # noqa: E402
from attention_viz.service.media_view import MediaViews  # noqa: E402
from attention_viz.service.pngstore import PngStore  # noqa: E402
from devtools.hub_models import save_tiny, save_tiny_image, save_tiny_whisper  # noqa: E402


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    root = tmp_path_factory.mktemp("media-view")
    folders = [save_tiny("marian", root / "tiny-marian"), save_tiny_image("deit", root / "tiny-deit"),
               save_tiny_whisper(root / "tiny-whisper")]
    catalog = Catalog(root / "none", hub_models=[str(f) for f in folders])
    picture = root / "scene.png"
    Image.fromarray(np.random.default_rng(1).integers(0, 256, (40, 56, 3), dtype=np.uint8)).save(picture)
    soundfile.write(root / "tone.wav", 0.3 * np.sin(np.arange(8000) / 3).astype(np.float32), 16000)
    return MediaViews(catalog.real, PngStore(root / "png")), catalog, root


def test_pictures_and_recordings_go_to_their_tab_and_text_to_the_text_pickers_by_their_configs(media):
    views, catalog, _ = media
    assert views.choices() == [("tiny-deit (pictures)", "hub:tiny-deit"), ("tiny-whisper (recordings)",
                                                                          "hub:tiny-whisper")]
    assert [value for _, value in catalog.real_choices] == ["hub:tiny-marian"]
    assert [e.key for e in catalog.entries() if hasattr(e, "key")] == ["hub:tiny-marian", "untrained"]
    with pytest.raises(ValueError, match="Unknown model"):
        catalog.check_model("hub:tiny-whisper")  # the Transformer tab's API refuses it: it reads no text
    # the sliders' ranges from the configs, nothing loaded; then equal to the loaded models'
    assert views.shape("hub:tiny-deit") == (2, 4, 8) and views.shape("hub:tiny-whisper") == (2, 4, 8)
    assert not catalog.real.loaded("hub:tiny-deit")
    assert views.shape("hub:tiny-deit") == (2, 4, views.model("hub:tiny-deit").d_k)  # loaded: the same
    with pytest.raises(ValueError, match="Unknown model 'hub:tiny-marian' for pictures and recordings"):
        views.reads("hub:tiny-marian")


def test_a_pictures_views_are_its_maps_rows_over_the_patches_the_rollout_and_the_specials_apart(media):
    views, catalog, root = media
    model = catalog.real.get("hub:tiny-deit")
    run = run_media(model, str(root / "scene.png"), max_new_tokens=1, variation=Variation("none"))
    answer = views.view("hub:tiny-deit", str(root / "scene.png"), "none", 1.0, 1, 3, 7)
    weights = run.maps["encoder.1.self_attn"]  # (H, T, T)
    drawn = np.asarray(Image.open(answer["overlay"]))
    seen = model.modality.seen(model.encode(str(root / "scene.png")).ids)
    assert drawn.shape == (448, 448, 3)
    np.testing.assert_array_equal(drawn, overlay_pixels(seen, weights[3, 7], (4, 4), 2, 5, 14))
    table = [[float(x) for x in line.strip("| ").split(" | ")[1:]] for line in answer["specials"].splitlines()
             if line.startswith("| H")]
    assert len(table) == 4
    for h, row in enumerate(table):  # each head's weight on [CLS], [DIST] and every patch, from patch 1,1
        np.testing.assert_allclose(row, [weights[h, 7, 0], weights[h, 7, 1], weights[h, 7, 2:].sum()], atol=6e-4)
    assert "from **patch 1,1**" in answer["notes"] and "off (plain q·k)" in answer["notes"]
    assert views.query_at("hub:tiny-deit", 447, 447) == 17 and views.query_at("hub:tiny-deit", 0, 0) == 2
    assert views.query_at("hub:tiny-deit", 8 * 14 + 1, 0) == 3  # one patch (8 px) to the right, zoomed 14 times
    with pytest.raises(ValueError, match="query token"):
        views.view("hub:tiny-deit", str(root / "scene.png"), query=18)


def test_a_run_is_computed_once_for_its_file_and_scaling_and_kept_within_the_bound(media, monkeypatch):
    views, catalog, root = media
    import attention_viz.hub.text_run as text_run

    calls = []
    real_run = text_run.run_media
    monkeypatch.setattr(text_run, "run_media", lambda *a, **k: calls.append(k["variation"]) or real_run(*a, **k))
    path = str(root / "scene.png")
    for head in range(4):
        views.view("hub:tiny-deit", path, "custom", 0.5, 0, head, 0)
    views.view("hub:tiny-deit", path, "custom", 0.25, 0, 0, 0)
    assert calls == [Variation(0.5), Variation(0.25)]
    for factor in np.linspace(0.1, 0.9, views.kept + 2):
        views.view("hub:tiny-deit", path, "custom", float(factor), 0, 0, 0)
    assert len(views._runs) == views.kept


def test_a_recordings_alignment_rows_are_what_each_step_writes_and_its_encoder_is_the_long_view(media):
    views, catalog, root = media
    answer = views.view("hub:tiny-whisper", str(root / "tone.wav"), "sqrt_dk", 1.0, 1, 2)
    assert answer["notes"].startswith("**Transcript**: “") and "50 encoder positions of 20 ms" in answer["notes"]
    assert set(answer) == {"alignment", "encoder", "notes"} and "alignment heads" not in answer["notes"]
    assert answer["encoder"]["kind"] == "long" and answer["encoder"]["run"] in views.long
    model = catalog.real.get("hub:tiny-whisper")
    model.model.generation_config.alignment_heads = [[1, 2], [0, 3]]  # as whisper-tiny's config names its own
    try:
        named = views.view("hub:tiny-whisper", str(root / "tone.wav"), "sqrt_dk", 1.0, 1, 2)["notes"]
        other = views.view("hub:tiny-whisper", str(root / "tone.wav"), "sqrt_dk", 1.0, 1, 1)["notes"]
    finally:
        del model.model.generation_config.alignment_heads
    assert "names 2 alignment heads" in named and "(L1·H2, L0·H3): this one is one of them" in named
    assert "this one is not among them" in other
    with pytest.raises(ValueError, match="Record or upload a recording first"):
        views.view("hub:tiny-whisper", None)


def test_overlay_pixels_blend_the_colour_of_each_patch():
    rng = np.random.default_rng(0)
    picture = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
    row = np.array([0.5, 0.1, 0.2, 0.0, 0.2])  # one special token, then 2 x 2 patches
    image = overlay_pixels(picture, row, (2, 2), 1, marked=3, zoom=2)
    assert image.shape == (32, 32, 3)
    colour = colormap_lut()[255].astype(float)  # patch (0, 1) holds the patches' largest weight
    np.testing.assert_array_equal(image[4, 20], np.rint(ALPHA * colour + (1 - ALPHA) * picture[2, 10]))
    assert (image[31, 31] == MARK_RGB).all() and (image[16, 16] == MARK_RGB).all()  # patch (1, 1) outlined


def test_the_lessons_picture_steps_quote_the_class_tokens_rows_of_the_view_they_open(media):
    from attention_viz.core.maps import head_statistics
    from attention_viz.service import Lesson, Runs, Views

    _, catalog, _ = media
    views = Views(Runs(catalog))
    lesson = Lesson(views)
    assert lesson.titles[-2:] == ("Where a picture's class token looks",
                                  "Take the 1/√d_k out of a vision Transformer")
    assert len(lesson) == len(Lesson.TITLES) + 4 + 2  # the text model's four real steps, then the pictures'
    scaled, unscaled = lesson.step(len(lesson) - 2), lesson.step(len(lesson) - 1)
    assert scaled.tab == unscaled.tab == "media" and scaled.media["scale"] == "sqrt_dk"
    assert unscaled.media["scale"] == "none" and scaled.media["head"] == unscaled.media["head"]
    rows = {s: views.media.run("hub:tiny-deit", scaled.media["picture"], s).maps["encoder.1.self_attn"][:, 0]
            for s in ("sqrt_dk", "none")}
    entropy = {s: head_statistics(r[:, None, :])["entropy"] for s, r in rows.items()}
    head = int(entropy["sqrt_dk"].argmin())
    assert scaled.media["head"] == head
    assert f"In the last layer, 1, the class token `[CLS]` of head {head}" in scaled.text
    assert f"{rows['sqrt_dk'][head][2:].sum():.2f} of its weight on the patches" in scaled.text
    assert ", ".join(f"{e:.2f}" for e in entropy["none"]) in unscaled.text
    assert "off (plain q·k)" in unscaled.media["answer"]["notes"] and unscaled.media["answer"]["query"] == 0


def test_two_askers_of_one_new_run_share_one_pass_and_a_refusal_reaches_both(media, monkeypatch):
    """The second asker waits for the first one's pass (holding no lock) and draws from it; a file the first finds
    refused is refused to the second with the same sentence, and not kept."""
    import threading

    import attention_viz.hub.images as images

    views, _, root = media
    started, release, calls = threading.Event(), threading.Event(), []
    real_read = images.read_image

    def slow(*args, **kwargs):
        if isinstance(args[0], str):  # the file's one read (the run's own reads take the picture it gave)
            calls.append(args[0])
            started.set()
            release.wait(60)
        return real_read(*args, **kwargs)

    monkeypatch.setattr(images, "read_image", slow)
    bad = root / "bad.png"
    bad.write_bytes(b"not a picture at all")
    for path, factor in ((str(root / "scene.png"), 0.75), (str(bad), 0.75)):
        started.clear()
        release.clear()
        answers = []

        def ask():
            try:
                answers.append(views.view("hub:tiny-deit", path, "custom", factor, 0, 1, 0)["overlay"])
            except ValueError as refusal:
                answers.append(str(refusal))

        first = threading.Thread(target=ask)
        first.start()
        assert started.wait(60)
        second = threading.Thread(target=ask)
        second.start()
        kept = next(kept for key, kept in views._runs.items() if key[1] == path and key[4] == Variation(factor))
        for _ in range(6000):  # until the second asker waits on the first one's pass (CPython's Event internals)
            if kept.done._cond._waiters:
                break
            threading.Event().wait(0.01)
        assert kept.done._cond._waiters, "the second asker never waited for the first one's pass"
        release.set()
        first.join(60)
        second.join(60)
        assert len(answers) == 2 and answers[0] == answers[1]
    assert calls == [str(root / "scene.png"), str(bad)]  # one pass each
    assert answers[0].startswith("Not read: the file is not a picture")
    assert not any(key[1] == str(bad) for key in views._runs)  # a refused run is not kept


def test_a_pictures_run_opens_in_the_explorer_as_one_offline_file_and_a_recording_is_refused_saying_why(media):
    from attention_viz.service.exports import ExportFolder

    views, catalog, root = media
    exports = ExportFolder()
    try:
        with_exports = MediaViews(catalog.real, views.store, exports)
        path, = with_exports.explorer("hub:tiny-deit", str(root / "scene.png"), "none", 1.0, client="page")
        page = open(path, encoding="utf-8").read()
        assert path.endswith("tiny-deit_explorer.html") and "<script" in page and "http" not in page.split("<body")[0]
        assert "patch 3,3" in page and "[DIST]" in page and "off (plain q·k)" in page
        with pytest.raises(ValueError, match="a recording's encoder maps"):
            with_exports.explorer("hub:tiny-whisper", str(root / "tone.wav"))
    finally:
        exports.close()


@pytest.fixture(scope="module")
def long_media(tmp_path_factory):
    """A Whisper hearing 12 s at once (600 encoder positions: the long view's overview in blocks of 2 x 2)."""
    root = tmp_path_factory.mktemp("media-long")
    catalog = Catalog(root / "none", hub_models=[str(save_tiny_whisper(root / "whisper-12s", seconds=12))])
    t = np.arange(5 * 16000) / 16000
    soundfile.write(root / "tone.wav", (0.3 * np.sin(2 * np.pi * 440 * t) * (t < 2.5)).astype(np.float32), 16000)
    return MediaViews(catalog.real, PngStore(root / "png")), catalog, root


def decoded(packed: dict, dtype) -> np.ndarray:
    import base64

    return np.frombuffer(base64.b64decode(packed["data"]), dtype=np.dtype(dtype).newbyteorder("<"))


def test_a_recordings_encoder_regions_are_its_maps_exact_from_the_kept_q_and_k_and_no_full_map_is_held(long_media):
    """The encoder's self-attention through the long pass: the payload's overview is each 2 x 2 block's largest weight
    of the map one pass holds in memory, and a region asked as the page asks it (LongRuns.view) is that map's weights
    to float32 rounding, under the run's scaling; the kept run holds the decoder's and cross maps only, and a run
    dropped from the long runs' budget is read again at the next view."""
    views, catalog, root = long_media
    key, path = "hub:whisper-12s", str(root / "tone.wav")
    answer = views.view(key, path, "custom", 0.5, 1, 2)
    encoder = answer["encoder"]
    assert encoder["kind"] == "long" and encoder["length"] == 600 and encoder["model"] == key
    assert encoder["pieces"][:2] == ["0.00 s", "0.02 s"] and encoder["words"][599] == "11.98 s"
    assert encoder["seconds"] == pytest.approx(0.02)  # each position's: the view writes its spans as times
    assert encoder["keys"] == ["encoder.0.self_attn", "encoder.1.self_attn"] and encoder["heads"] == 4
    overview = encoder["overview"]
    assert (overview["key"], overview["head"], overview["block"], overview["side"]) == ("encoder.1.self_attn", 2, 2,
                                                                                          300)
    assert "300 x 300 cells (each the largest weight of a block of 2 x 2 positions)" in answer["notes"]
    model = catalog.real.get(key)
    features = model.encode(path).ids[None]  # (1, 80, 1200)
    with torch.no_grad():
        _, maps = model.forward(features, torch.tensor([[model.start_id]]), variation=Variation(0.5))
    full = maps["encoder.1.self_attn"][0, 2].double().numpy()  # (600, 600), in memory
    blocks = full.reshape(300, 2, 300, 2).max(axis=(1, 3))
    cells = decoded(overview, np.uint16).reshape(300, 300) / 65535 * overview["top"]
    np.testing.assert_allclose(cells, blocks, rtol=0, atol=overview["top"] / 65535)
    asked = {"run": encoder["run"], "what": "region", "key": "encoder.1.self_attn", "head": 2, "rows": [100, 356],
             "cols": [300, 556]}
    region = views.long.view(asked)
    np.testing.assert_allclose(decoded(region, np.float32).reshape(256, 256), full[100:356, 300:556], rtol=0,
                               atol=2e-7)  # float32 rounding of weights <= 1
    other = views.long.view({**asked, "key": "encoder.0.self_attn", "head": 0, "rows": [0, 40], "cols": [560, 600]})
    np.testing.assert_allclose(decoded(other, np.float32).reshape(40, 40),
                               maps["encoder.0.self_attn"][0, 0, :40, 560:].double().numpy(), rtol=0, atol=2e-7)
    kept = next(kept for run_key, kept in views._runs.items() if run_key[1] == path)
    assert sorted(kept.run.maps) == sorted(k for k in model.map_keys if not k.startswith("encoder."))
    views.long._make_room(views.long.budget)  # every long run dropped, as other visitors' pages would
    assert encoder["run"] not in views.long
    again = views.view(key, path, "custom", 0.5, 0, 1)["encoder"]
    assert again["run"] != encoder["run"] and again["run"] in views.long and again["overview"]["key"] == "encoder.0.self_attn"
    assert views.long.view(asked)["error"].endswith("press Read it to read the recording again.")  # the old id
    np.testing.assert_allclose(decoded(views.long.view({**asked, "run": again["run"]}), np.float32).reshape(256, 256),
                               full[100:356, 300:556], rtol=0, atol=2e-7)
