"""A position bias on QKᵀ in the app, through gradio_client: tiny T5 (learned relative positions) and tiny Bloom
(ALiBi) on a server set up with them (tests/e2e/conftest.py's bias_models_app). /visualize's run carries B per layer
and head as the model computes it; the position_bias input (optional, last) takes it out; Compare shows what it does;
a model without one runs as it is."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from attention_viz.explorer import unpack, unpack_biases  # noqa: E402
from attention_viz.hub import load_pretrained  # noqa: E402

TEXT = "Attention is all you need."


@pytest.fixture(scope="module")
def bias_app(bias_models_app):
    base, folders = bias_models_app
    return Client(base + "/", verbose=False), folders


def visualize(client, model, position_bias=None, text=TEXT):
    extra = () if position_bias is None else (None, "", "zero", position_bias)  # an older client sends none
    return client.predict(text, model, 64, "sqrt_dk", 1.0, True, True, 0, 64, 4, *extra, api_name="/visualize")


def test_t5s_run_carries_its_position_bias_as_the_model_computes_it_and_the_switch_takes_it_out(bias_app):
    client, folders = bias_app
    run, _, notes = visualize(client, "hub:tiny-t5")
    biases = unpack_biases(run)
    assert {key.split(".")[0] + "." + key.split(".")[2] for key in biases} == {"encoder.self_attn",
                                                                               "decoder.self_attn"}
    model = load_pretrained(folders["t5"])  # the same folder in this process: T5's own compute_bias
    S, T = len(run["tokens"]["source"]), len(run["tokens"]["target"])
    t5 = model.model
    with torch.no_grad():
        encoder = t5.encoder.block[0].layer[0].SelfAttention.compute_bias(S, S)[0].numpy()  # (H, S, S)
        decoder = t5.decoder.block[0].layer[0].SelfAttention.compute_bias(T, T)[0].numpy()  # (H, T, T)
    for key, bias in biases.items():
        np.testing.assert_array_equal(bias, encoder if key.startswith("encoder") else decoder)
    assert "position_bias" not in run and "Position bias taken out" not in notes

    off, _, off_notes = visualize(client, "hub:tiny-t5", position_bias=False)
    assert off["position_bias"] is False and off["settings"]["position_bias"] is False and not unpack_biases(off)
    assert "Position bias taken out" in off_notes
    on_maps, off_maps = unpack(run)[0], unpack(off)[0]
    assert np.abs(on_maps["encoder.0.self_attn"] - off_maps["encoder.0.self_attn"]).max() > 1e-3
    same, _, _ = visualize(client, "hub:tiny-t5", position_bias=True)
    assert same == run  # the switch on: the model as it is, the same answer


def test_compare_shows_the_position_bias_on_and_off(bias_app):
    client, _ = bias_app
    comparison, text = client.predict(TEXT, "hub:tiny-t5", 64, "sqrt_dk", 1.0, True, True, 0, 64, 4,
                                      "encoder.self_attn", 0, 1, "position_bias", api_name="/compare")
    assert comparison["labels"] == ["position bias on", "position bias off"]
    assert np.abs(np.array(comparison["difference"])).max() > 1e-3
    with pytest.raises(AppError, match="adds no position bias"):
        client.predict(TEXT, "hub:tiny-gpt2", 64, "sqrt_dk", 1.0, True, True, 0, 64, 4, "decoder.self_attn", 0, 1,
                       "position_bias", api_name="/compare")


def test_blooms_alibi_is_a_bias_of_the_keys_position_the_same_in_every_row(bias_app):
    client, _ = bias_app
    run, _, _ = visualize(client, "hub:tiny-bloom")
    biases = unpack_biases(run)
    assert biases and all(key.startswith("decoder.") and key.endswith("self_attn") for key in biases)
    bias = biases["decoder.0.self_attn"]  # (H, T, T): m_h·j in every row
    np.testing.assert_array_equal(bias, np.broadcast_to(bias[:, :1], bias.shape))
    slopes = bias[:, 0, 1] - bias[:, 0, 0]
    K = bias.shape[-1]
    np.testing.assert_allclose(bias[:, 0, :] - bias[:, 0, :1], slopes[:, None] * np.arange(K), rtol=1e-5, atol=1e-5)
    assert (slopes > 0).all() and len(set(np.round(slopes, 6))) == len(slopes)  # a slope per head
    off, _, _ = visualize(client, "hub:tiny-bloom", position_bias=False)
    assert off["position_bias"] is False and not unpack_biases(off)


def test_a_model_without_a_position_bias_runs_as_it_is_and_a_bad_switch_is_refused(bias_app):
    client, _ = bias_app
    run, _, _ = visualize(client, "hub:tiny-gpt2")
    assert not unpack_biases(run) and "position_bias" not in run
    assert visualize(client, "hub:tiny-gpt2", position_bias=False)[0] == run  # nothing to take out
    with pytest.raises(AppError, match="position bias must be true or false"):
        visualize(client, "hub:tiny-t5", position_bias="sometimes")
