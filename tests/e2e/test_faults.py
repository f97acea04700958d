"""Faults a class must never feel, against the app as it runs (`python app.py` on 127.0.0.1): a Hub that accepts
and never answers, broken model folders, and the mean-ablation sequence that once deadlocked the server. Each
asserts an answer or a clear refusal within a bound, and that the other visitors are served meanwhile."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

pytest.importorskip("transformers")

from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from devtools.hub_models import save_tiny  # noqa: E402
from devtools.launcher import running_app  # noqa: E402
from devtools.silent_hub import SilentHub  # noqa: E402

SILENT = "someone/silent-model"  # the Hub here is a socket that accepts and never answers


@pytest.fixture(scope="module")
def silent_hub():
    with SilentHub() as hub:
        yield hub.url, hub.held


@pytest.fixture(scope="module")
def app(tmp_path_factory, silent_hub):
    root = tmp_path_factory.mktemp("faults")
    marian = save_tiny("marian", root / "tiny-marian")
    truncated = save_tiny("bert", root / "truncated-bert")
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    corrupt = save_tiny("gpt2", root / "corrupt-config")
    (corrupt / "config.json").write_text('{"model_type": "gpt2", ')
    with running_app(root / "app.log", [marian, SILENT, truncated, corrupt], HF_HUB_OFFLINE="0",
                     TRANSFORMERS_OFFLINE="0", HF_ENDPOINT=silent_hub[0], HF_HUB_ETAG_TIMEOUT="2",
                     HF_HUB_DOWNLOAD_TIMEOUT="2", HF_HOME=str(root / "hf-home")) as server:
        yield server.base + "/", root


def visualize(client, text, model, d_k=64, scale="sqrt_dk", factor=1.0, heads_off=None, ablation=None):
    return client.predict(text, model, d_k, scale, factor, True, True, 0, 64, 4, None, heads_off, ablation,
                          api_name="/visualize")


def timed(fn, *args, **kwargs):
    began = time.monotonic()
    try:
        return fn(*args, **kwargs), time.monotonic() - began
    except AppError as error:
        return error, time.monotonic() - began


def test_a_hub_that_never_answers_is_refused_with_the_reason_while_everyone_else_is_served(app, silent_hub):
    url, root = app
    client, other = Client(url, verbose=False), Client(url, verbose=False)
    with ThreadPoolExecutor(2) as pool:
        waiting = pool.submit(timed, visualize, client, "hello", f"hub:{SILENT}")
        time.sleep(1)  # the download is under way, its requests unanswered
        small, small_s = timed(visualize, other, "hello", "reverse/sqrt_dk", 16)
        real, real_s = timed(visualize, other, "the cat sat", "hub:tiny-marian")
        health = httpx.get(url + "healthz", timeout=5)
        refused, refused_s = waiting.result(timeout=120)
    assert small[0]["output"] == "olleh" and small_s < 30
    assert real[0]["settings"]["model"] == "hub:tiny-marian" and real_s < 60
    assert health.status_code == 200 and health.json()["real_models"][SILENT] in ("loading", "refused")
    assert isinstance(refused, AppError) and refused_s < 65
    assert "did not answer in time" in str(refused) or "still loading" in str(refused)
    assert silent_hub[1]  # the server did ask the silent Hub
    assert "Traceback" not in str(refused) and str(root) not in str(refused)


@pytest.mark.parametrize("name", ["truncated-bert", "corrupt-config"])
def test_a_broken_folder_is_refused_with_a_message_remembered_and_the_rest_works(app, name):
    url, root = app
    client = Client(url, verbose=False)
    first, _ = timed(visualize, client, "hello", f"hub:{name}")
    second, second_s = timed(visualize, client, "hello", f"hub:{name}")
    for refused in (first, second):
        assert isinstance(refused, AppError) and name in str(refused)
        assert "Traceback" not in str(refused) and str(root) not in str(refused)
        assert "Hugging Face cache" not in str(refused)  # a broken folder is not a missing one
    assert str(first) == str(second) and second_s < 10  # remembered: no second load
    assert httpx.get(url + "healthz", timeout=5).json()["real_models"][name] == "refused"
    assert visualize(client, "hello", "reverse/sqrt_dk", 16)[0]["output"] == "olleh"


def test_mean_ablation_after_its_means_left_their_cache_answers(app):
    """A student's run with a head off by mean ablation, then 17 others' (each with its own means: the cache
    keeps 16), then the student's again and its step view: each answers, and the server stays healthy."""
    url, _ = app
    client = Client(url, verbose=False)
    first, first_s = timed(visualize, client, "the cat sat", "hub:tiny-marian", heads_off="encoder.0.self_attn: 0",
                           ablation="mean")
    assert not isinstance(first, AppError) and first_s < 120
    for i in range(17):
        visualize(client, "a dog ran", "hub:tiny-marian", scale="custom", factor=0.1 + 0.05 * i,
                  heads_off="encoder.0.self_attn: 1", ablation="mean")
    again, again_s = timed(visualize, client, "the cat sat", "hub:tiny-marian", heads_off="encoder.0.self_attn: 0",
                           ablation="mean")
    steps, steps_s = timed(client.predict, "the cat sat", "hub:tiny-marian", 64, "sqrt_dk", 1.0, True, True, 0,
                           64, 4, "encoder.self_attn", 0, 0, None, "encoder.0.self_attn: 0", "mean",
                           api_name="/steps")
    assert not isinstance(again, AppError) and again_s < 60 and again[0]["output"] == first[0]["output"]
    assert not isinstance(steps, AppError) and steps_s < 60
    assert httpx.get(url + "healthz", timeout=5).status_code == 200
