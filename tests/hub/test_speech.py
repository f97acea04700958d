"""Whisper through our Eq. 1: a recording read, resampled and cut by well-kept libraries, proven on load, every map
(encoder, decoder, cross) equal to transformers' eager attention, the transcript written as Whisper's own `generate`
writes it (language detected, forced task, no timestamps), and bad recordings refused with the fault named."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from attention_viz.hub import load_pretrained
from attention_viz.hub.speech import AudioRefusedError, read_audio
from devtools.hub_models import save_tiny_whisper


@pytest.fixture(scope="module")
def whisper_folder(tmp_path_factory):
    return save_tiny_whisper(tmp_path_factory.mktemp("speech") / "whisper")


def wav(seconds: float, rate: int = 22050, channels: int = 1, fmt: str = "WAV") -> bytes:
    import soundfile

    t = np.arange(int(seconds * rate)) / rate
    tone = (0.3 * np.sin(2 * np.pi * 330 * t) * np.exp(-t)).astype(np.float32)
    data = np.stack([tone] * channels, 1) if channels > 1 else tone
    out = io.BytesIO()
    soundfile.write(out, data, rate, format=fmt)
    return out.getvalue()


def test_every_map_equals_eager_and_the_transcript_is_generates(whisper_folder):
    model = load_pretrained(whisper_folder, dtype=torch.float64)
    assert model.fidelity.proven and model.fidelity.source == "recordings" and model.layout == "encoder-decoder"
    encoding = model.encode(wav(0.7, rate=22050, channels=2))  # resampled to 16 kHz, mixed down, padded to 1 s
    assert encoding.note == "" and encoding.ids.shape == (80, 100) and len(encoding.tokens) == 50
    assert encoding.tokens[:2] == ["0.00 s", "0.02 s"]
    features = encoding.ids[None].double()
    written, maps = model.greedy_decode(features, max_new_tokens=8)
    hf = model.model
    hf.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            generated = hf.generate(features, do_sample=False, num_beams=1, max_new_tokens=8,
                                    return_dict_in_generate=True)["sequences"]
            prompt = generated[:, : generated.size(1) - written.size(1)]
            decoder = torch.cat([prompt, written[:, :-1]], 1)
            eager = hf(input_features=features, decoder_input_ids=decoder, output_attentions=True)
    finally:
        hf.set_attn_implementation("attention_viz")
    assert torch.equal(generated[:, prompt.size(1):], written)
    assert model.tokenizer.convert_ids_to_tokens(prompt[0].tolist())[0] == "<|startoftranscript|>"
    for kind, theirs in (("encoder.{}.self_attn", eager.encoder_attentions),
                         ("decoder.{}.self_attn", eager.decoder_attentions),
                         ("decoder.{}.cross_attn", eager.cross_attentions)):
        for i, weights in enumerate(theirs):
            torch.testing.assert_close(maps[kind.format(i)], weights, rtol=0, atol=1e-6)
    assert maps["decoder.1.cross_attn"].shape == (1, 4, decoder.size(1), 50)


def test_a_forced_task_and_a_named_language_are_written_as_generate_writes_them(whisper_folder, tmp_path):
    import shutil

    from transformers import GenerationConfig

    folder = tmp_path / "whisper-forced"
    shutil.copytree(whisper_folder, folder)
    config = GenerationConfig.from_pretrained(folder)
    config.forced_decoder_ids = [[1, None], [2, config.task_to_id["translate"]]]  # whisper-tiny's kind of config
    config.save_pretrained(folder)
    model = load_pretrained(folder)
    features = model.encode(wav(0.5)).ids[None]
    for language in (None, "de"):
        model.model.generation_config.language = language
        written, _ = model.greedy_decode(features, max_new_tokens=5)
        model.model.set_attn_implementation("eager")
        try:
            generated = model.model.generate(features, do_sample=False, num_beams=1, max_new_tokens=5)
        finally:
            model.model.set_attn_implementation("attention_viz")
        assert torch.equal(generated[:, -written.size(1):], written), language


def test_a_long_recording_is_cut_to_the_window_and_says_so(whisper_folder, tmp_path):
    model = load_pretrained(whisper_folder)
    path = tmp_path / "long.flac"
    path.write_bytes(wav(95.0, rate=8000, fmt="FLAC"))
    encoding = model.encode(path)
    assert encoding.note == ("Read the first 1.0 s of the recording's 1:35: the model hears 1.0 s at once.")
    samples, note = read_audio(path, 16000, 1.0)
    assert len(samples) == 16000 and note == encoding.note


def test_bad_recordings_and_features_are_refused_naming_the_fault(whisper_folder, tmp_path):
    with pytest.raises(AudioRefusedError, match="not a recording"):
        read_audio(b"GIF89a not a sound" * 10, 16000, 30)
    damaged = wav(1.0, fmt="FLAC")
    with pytest.raises(AudioRefusedError, match="damaged|not a recording"):
        read_audio(damaged[:200] + b"\x00" * 100, 16000, 30)
    with pytest.raises(AudioRefusedError, match="no recording at 'absent.wav'"):
        read_audio(tmp_path / "absent.wav", 16000, 30)
    with pytest.raises(AudioRefusedError, match="not finite"):
        read_audio((np.array([0.0, np.nan, 0.1]), 16000), 16000, 30)
    model = load_pretrained(whisper_folder)
    with pytest.raises(ValueError, match=r"input_features of shape \[B, 80, 100\].*got \(1, 80, 50\)"):
        model.forward(torch.zeros(1, 80, 50), torch.tensor([[model.start_id]]))


def test_show_draws_a_recordings_maps_its_transcript_written_after_the_prompt(whisper_folder):
    import attention_viz as av

    model = load_pretrained(whisper_folder)
    view = av.show(model, wav(2.0), max_new_tokens=4)
    payload = view.payload
    assert payload["tokens"]["source"][:2] == ["0.00 s", "0.02 s"]
    axis = model.input_axis()  # the time axis: its labels the payload's, 0.02 s a position
    assert axis.name == "frames" and list(axis.labels) == payload["tokens"]["source"]
    assert payload["source_axis"] == {"name": "frames", "seconds": axis.seconds} and abs(axis.seconds - 0.02) < 1e-9
    target = payload["tokens"]["target"]
    assert target[0] == "<|startoftranscript|>" and len(payload["decode"]["written"]) == len(target)
    assert payload["decode"]["written"][0] == target[1]  # the prompt's first step writes its next token
    assert any("Read the first 1.0 s of the recording's 2.0 s" in note for note in payload["notes"])


@pytest.fixture(scope="module")
def long_whisper(tmp_path_factory):
    """A tiny Whisper hearing 3 s at once: 150 encoder positions, in float64."""
    folder = save_tiny_whisper(tmp_path_factory.mktemp("speech-long") / "whisper", seconds=3)
    return load_pretrained(folder, dtype=torch.float64)


def test_the_long_pass_reads_a_recording_with_the_encoder_every_map_as_in_memory(long_whisper):
    """model.long_run(features): the encoder's 150 positions through the long pass, blocks of 32 query rows; every
    encoder map's summaries, regions and overviews equal the maps of one pass in memory (and transformers' eager
    encoder's), under the switches too; the run's output is the encoder's last states and it says what read it."""
    from attention_viz.hub.long import READS_RECORDING, LongRunError
    from tests.hub.test_long import assert_long_equals

    model = long_whisper
    encoding = model.encode(wav(2.2))
    features = encoding.ids[None].double()  # (1, 80, 300)
    start = torch.tensor([[model.start_id]])
    encoder_keys = [key for key in model.map_keys if key.startswith("encoder.")]
    for switches in ({}, {"scale": "none"}, {"heads_off": {"encoder.0.self_attn": [1, 2]}}):
        run = model.long_run(features, rows=32, **switches)
        _, maps = model.forward(features, start, **switches)
        assert run.length == run.given == 150 and run.keys == encoder_keys and run.note == ""
        assert run.reads == READS_RECORDING and "recording with its encoder" in run.reads
        assert_long_equals(run, {key: maps[key] for key in encoder_keys}, size=11)
        run.close()
    hf = model.model
    hf.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            eager = hf.get_encoder()(input_features=features, output_attentions=True)
    finally:
        hf.set_attn_implementation("attention_viz")
    run = model.long_run(encoding.ids, keep="memory")  # features without the batch axis
    torch.testing.assert_close(run.logits, eager.last_hidden_state, rtol=1e-9, atol=1e-9)
    assert_long_equals(run, {f"encoder.{i}.self_attn": a for i, a in enumerate(eager.attentions)}, size=16)
    cut = model.long_run(wav(4.5))  # a recording: read by the modality, cut to the window, and said so
    assert cut.length == 150 and cut.note.startswith("Read the first 3.0 s of the recording's 4.5 s")
    with pytest.raises(LongRunError, match="encoder.. maps only"):
        model.long_run(features, heads_off={"decoder.0.cross_attn": [0]})
    with pytest.raises(LongRunError, match=r"input_features of shape \[B, 80, 300\]"):
        model.long_run(torch.zeros(1, 80, 100, dtype=torch.float64))
    with pytest.raises(LongRunError, match="one recording at a time"):
        model.long_run(features.repeat(2, 1, 1))
    assert model.model.config._attn_implementation == "attention_viz"


def test_show_long_draws_the_encoders_long_view_over_the_time_axis(long_whisper):
    import attention_viz as av

    payload = av.show(long_whisper, wav(4.5), long=True).payload
    assert payload["kind"] == "long" and payload["read"] == payload["of"] == payload["length"] == 150
    assert payload["pieces"][:2] == ["0.00 s", "0.02 s"] and payload["words"][149] == "2.98 s"
    assert payload["keys"] == ["encoder.0.self_attn", "encoder.1.self_attn"]
    assert "Read the first 3.0 s" in payload["note"] and "recording with its encoder" in payload["note"]
    assert payload["title"].endswith("150 positions, 2 maps x 4 heads") and payload["offline"]["maps"]
    assert payload["seconds"] == pytest.approx(0.02)  # each position's: the view writes its spans as times
    assert av.show(long_whisper, wav(1.0), max_new_tokens=2).payload.get("kind") != "long"  # unless asked


def test_pattern_scores_and_save_figure_on_a_recordings_maps(whisper_folder, tmp_path):
    """maps_of(whisper, recording): every map with the times and the transcript's tokens; pattern scores on every
    kind (cross-attention's first token: the weight on 0.00 s), against the maps by hand; pattern_scores(model) says
    why not; save_figure draws a cross-attention head with the times on its keys."""
    import attention_viz as av

    model = load_pretrained(whisper_folder)
    run = av.maps_of(model, wav(0.8), max_new_tokens=4)
    assert run.source_tokens[:2] == ["0.00 s", "0.02 s"] and run.target_tokens[0] == "<|startoftranscript|>"
    assert run.settings["input"] == "a recording" and run.settings["model"] == model.name
    scores = av.pattern_scores(run)
    assert sorted(scores.scores) == ["decoder.cross_attn", "decoder.self_attn", "encoder.self_attn"]
    assert sorted(scores.scores["decoder.cross_attn"]) == ["first"]
    for i in range(2):
        cross = run[f"decoder.{i}.cross_attn"]  # (H, T, 50)
        np.testing.assert_allclose(scores.scores["decoder.cross_attn"]["first"][i], cross[:, :, 0].mean(-1),
                                   rtol=1e-5)
    with pytest.raises(ValueError, match="reads recordings, not random tokens"):
        av.pattern_scores(model)
    svg = av.save_figure(run, "decoder.1.cross_attn", 2, tmp_path / "cross.svg").read_text()
    assert "0.00 s" in svg and "0.48 s" in svg and "a recording" in svg  # the times on its keys, thinned
