"""Real models in the app, as a visitor uses it through gradio_client: the server set up with small real models
(Marian translation models and a GPT-2, random weights, real tokenizers, saved offline) and one Hub id that is not
cached, with the Hub switched off (tests/e2e/conftest.py's real_models_app)."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("transformers")

from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from attention_viz.explorer import unpack  # noqa: E402
from tests.e2e.conftest import UNREACHABLE as MISSING  # noqa: E402


@pytest.fixture(scope="module")
def real_app(real_models_app):
    """The app with the real models (tests/e2e/conftest.py), through gradio_client; and its log."""
    base, log = real_models_app
    return Client(base + "/", verbose=False), log


def visualize(client, text, model, d_k=64, scale="sqrt_dk", causal=True, padding=True, pads=0):
    return client.predict(text, model, d_k, scale, 1.0, causal, padding, pads, 64, 4, api_name="/visualize")


def test_the_picker_offers_the_real_models_it_was_set_up_with(real_app):
    client, _ = real_app
    info = client.view_api(return_format="dict", print_info=False)
    assert info  # the API answers; the picker's choices are in the page's config
    config = httpx.get(client.src.rstrip("/") + "/config").json()
    choices = [c for comp in config["components"] if comp.get("props", {}).get("elem_id") == "model"
               for c in comp["props"]["choices"]]
    values = [value for _, value in choices]
    assert {"hub:tiny-marian", "hub:tiny-gpt2", f"hub:{MISSING}"} <= set(values)
    assert not any(str(real_app[1].parent) in value for value in values)  # no server path on the page


def test_a_real_translation_model_shows_every_kind_with_its_own_pieces(real_app):
    client, _ = real_app
    run, output, notes = visualize(client, "Attention is all you need.", "hub:tiny-marian")
    assert [k["kind"] for k in run["kinds"]] == ["encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"]
    assert run["tokens"]["source"][-1] == "</s>" and any(t.startswith("▁") for t in run["tokens"]["source"])
    assert run["settings"]["d_k"] == 8  # the model's own (d_model 32 / 4 heads), whatever d_k was sent
    assert "real Marian model" in notes
    maps, masks = unpack(run)
    for key, weights in maps.items():
        kind = key.split(".")[0] + "." + key.split(".")[2]
        live = masks[kind].any(-1)
        np.testing.assert_allclose(weights.sum(-1)[:, live], 1.0, atol=2e-4)
        assert (weights[:, ~masks[kind]] == 0).all()


def test_the_switches_rerun_a_real_model(real_app):
    client, _ = real_app
    on, _, _ = visualize(client, "the cat sat on the mat", "hub:tiny-marian")
    off, _, notes = visualize(client, "the cat sat on the mat", "hub:tiny-marian", scale="none")
    a, b = unpack(on)[0], unpack(off)[0]
    assert any(np.abs(a[k] - b[k]).max() > 1e-4 for k in a)
    assert "not as it was trained" in notes
    lifted, _, _ = visualize(client, "the cat sat", "hub:tiny-gpt2", causal=False)
    maps, masks = unpack(lifted)
    assert masks["decoder.self_attn"].all()  # no causal mask: every position sees every other
    assert np.triu(maps["decoder.0.self_attn"][0], 1).max() > 0
    pads, _, _ = visualize(client, "the cat", "hub:tiny-marian", pads=3)
    assert pads["tokens"]["source"][-3:] == ["<pad>"] * 3
    assert not unpack(pads)[1]["encoder.self_attn"][:, -3:].any()


def test_a_decoder_only_model_has_only_masked_self_attention(real_app):
    client, _ = real_app
    run, output, _ = visualize(client, "hello world", "hub:tiny-gpt2")
    assert [k["kind"] for k in run["kinds"]] == ["decoder.self_attn"]
    assert run["tokens"]["source"] == []
    with pytest.raises(AppError, match="has no encoder-decoder attention"):
        client.predict("hello", "hub:tiny-gpt2", 8, "sqrt_dk", 1.0, True, True, 0, 64, 4, "decoder.cross_attn", 0, 0,
                       api_name="/steps")
    steps, text = client.predict("hello", "hub:tiny-gpt2", 8, "sqrt_dk", 1.0, True, True, 0, 64, 4,
                                 "decoder.self_attn", 1, 3, api_name="/steps")
    assert steps["d_k"] == 8 and len(steps["panels"]) == 5


def test_unicode_texts_and_the_token_cap(real_app):
    client, _ = real_app
    run, _, _ = visualize(client, "Grüße, 東京 — ünïcödé!", "hub:tiny-marian")
    assert run["tokens"]["source"]
    with pytest.raises(AppError, match="tokens for this model's tokenizer; the maximum is 64"):
        visualize(client, " ".join(["cat"] * 80), "hub:tiny-marian")
    with pytest.raises(AppError, match="control"):
        visualize(client, "tab\there", "hub:tiny-marian")


def test_a_model_that_cannot_be_had_is_refused_and_the_rest_works(real_app):
    client, log = real_app
    with pytest.raises(AppError, match="is not in this machine.s Hugging Face cache"):
        visualize(client, "hello", f"hub:{MISSING}")
    with pytest.raises(AppError, match="Unknown model"):
        visualize(client, "hello", "hub:gpt2")  # never set up: the server does not fetch it
    run, _, _ = visualize(client, "hello", "reverse/sqrt_dk", d_k=16)
    assert run["output"]
    assert "Traceback" not in log.read_text()


def test_the_readiness_endpoint_tells_each_real_models_state_by_its_page_name(real_app):
    """/healthz: loaded once used, refused when it cannot be had; names as the picker shows them, no server path."""
    client, log = real_app
    visualize(client, "hello", "hub:tiny-gpt2")
    with pytest.raises(AppError):
        visualize(client, "hello", f"hub:{MISSING}")
    states = httpx.get(client.src.rstrip("/") + "/healthz", timeout=10).json()["real_models"]
    assert states["tiny-gpt2"] == "loaded" and states[MISSING] == "refused"
    assert set(states) == {"tiny-marian", "tiny-gpt2", "wide-marian", MISSING} and str(log.parent) not in str(states)


def test_compare_and_export_on_a_real_model(real_app):
    client, _ = real_app
    comparison, text = client.predict("the cat", "hub:tiny-marian", 8, "sqrt_dk", 1.0, True, True, 2, 64, 4,
                                      "encoder.self_attn", 1, 0, "padding_mask", api_name="/compare")
    assert comparison["labels"] == ["padding mask on", "padding mask off"]
    assert np.abs(np.array(comparison["difference"])).max() > 0
    files = client.predict("the cat", "hub:tiny-marian", 8, "sqrt_dk", 1.0, True, True, 0, 64, 4,
                           "decoder.cross_attn", 1, 2, "absolute", api_name="/export")
    names = [str(f) for f in files]
    assert [Path(name).suffix for name in names] == [".png", ".png", ".npz", ".csv", ".svg", ".pdf", ".svg", ".pdf", ".html"]
    assert all("tiny-marian" in Path(name).name for name in names)
    page = Path(names[-1]).read_text(encoding="utf-8")  # the one-file view of the run on screen, offline
    assert "tiny-marian" in page and "<script" in page
    assert not any(f'{attribute}="http' in page for attribute in ("src", "href"))  # nothing loads over the network


def test_a_real_models_head_scores_stream_and_predict_returns_the_payload(real_app):
    """/importance on a real model streams partial payloads (heads to come as null, "progress") before the payload;
    predict returns the payload itself, and a repeat (cached) the same numbers."""
    client, _ = real_app
    args = ("the cat sat on the mat", "hub:tiny-marian", 8, "sqrt_dk", 1.0, True, True, 0, 64, 4)
    job = client.submit(*args, api_name="/importance")
    payload = job.result(timeout=120)
    told = job.outputs()
    assert payload["format"] == "attention_viz.importance/1" and "progress" not in payload and payload["total"] == 24
    assert all(v is not None for values in payload["drop"].values() for v in values)
    assert len(told) >= 2 and told[-1] == payload and all("progress" in p for p in told[:-1])
    assert told[0]["progress"]["total"] == 24
    assert client.predict(*args, api_name="/importance") == payload

# -- the Long text tab (a real model reading a page: service/long_runs.py, webui/long_tab.py)

PAGE = "The cat sat on the mat. Attention is all you need, and every student reads the paper before the lecture. " * 8


def long_view_call(base: str, asked: dict) -> dict:
    """The long view's server function, as the page calls it (POST /component_server)."""
    config = httpx.get(base + "config").json()
    component = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "long_view")
    answer = httpx.post(base + "gradio_api/component_server/", json={
        "data": asked, "component_id": component, "fn_name": "long_view", "session_hash": "long-test"}, timeout=30)
    assert answer.status_code == 200
    return answer.json()


def test_a_long_page_read_through_the_api_and_a_region_through_the_views_call(real_app):
    """The Long text tab's flow: /long_read reads what the model's positions hold (tiny GPT-2: 256) and says so; the
    region asked after through the view's server function is the exact weights (each row of a causal map's first
    block sums to 1); a bad text is refused with a sentence; a view of a run the server does not have says to read
    again; a translation model reads the page with its encoder, to its positions, and says both."""
    client, _ = real_app
    long_url = client.src.rstrip("/") + "/"
    payload = client.predict("hub:tiny-gpt2", PAGE, api_name="/long_read")
    assert payload["kind"] == "long" and payload["read"] == 256 < payload["of"]
    assert "positions end at 256" in payload["note"]
    assert payload["overview"]["side"] == 256 and len(payload["stats"]["first_token"]) == 2
    asked = {"run": payload["run"], "what": "region", "key": payload["keys"][1], "head": 3, "rows": [0, 32],
             "cols": [0, 32]}
    region = long_view_call(long_url, asked)
    weights = np.frombuffer(base64.b64decode(region["data"]), "<f4").reshape(32, 32)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(weights, 1) == 0)  # the causal mask: no weight on a later key
    sinkless = long_view_call(long_url, {**asked, "sink": False})
    assert sinkless["sink"] is False
    assert "read the text again" in long_view_call(long_url, {**asked, "run": "gone"})["error"]
    with pytest.raises(AppError, match="Paste a text"):
        client.predict("hub:tiny-gpt2", "  ", api_name="/long_read")
    translated = client.predict("hub:tiny-marian", PAGE, api_name="/long_read")  # offered: its encoder reads it
    assert translated["read"] == 256 < translated["of"] and translated["keys"] == ["encoder.0.self_attn",
                                                                                   "encoder.1.self_attn"]
    assert "positions end at 256" in translated["note"] and "reads the page with its encoder" in translated["note"]
