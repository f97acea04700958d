"""The launched app through gradio_client and raw HTTP: every named endpoint; bad input refused, app still up.

/visualize answers with the packed run (a dict: every map of every kind, layer and head), the output and the
notes; the endpoints of one head (/steps, /compare, /export) take kind, layer and head, and /steps and /compare
answer with that head's numbers (a dict) and a text.
"""

import base64
import json
import math
import re
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

import attention_viz as av
from attention_viz.explorer import compare_arrays, steps_arrays, unpack
from attention_viz.service.catalog import Catalog
from attention_viz.webui.widgets import prose_html

PNG = b"\x89PNG\r\n\x1a\n"
MAX_TEXT = Catalog().tokenizer.max_len  # the app's limit on a text: the longest max_len of the shipped cards
UNTRAINED = dict(text="hello", model="untrained", d_k=16, scale_mode="sqrt_dk", custom_factor=1.0,
                 causal_mask=True, padding_mask=True, pad_tokens=2, d_model=64, n_heads=4)
UNTRAINED_ARGS = dict(**UNTRAINED, kind="decoder.cross_attn", layer=1, head=2)  # one head's endpoints


@pytest.fixture(scope="module")
def client(app_url):
    return Client(app_url, verbose=False)


def is_png(path) -> bool:
    return Path(path).read_bytes()[:8] == PNG


def raw_call(app_url: str, api_name: str, data: list) -> tuple[str, object]:
    """POST a JSON body as any HTTP client may (NaN included), read the event stream: ("complete"|"error", data)."""
    url = f"{app_url}gradio_api/call/{api_name}"
    request = urllib.request.Request(url, data=json.dumps({"data": data}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        event_id = json.load(response)["event_id"]
    with urllib.request.urlopen(f"{url}/{event_id}", timeout=60) as response:
        lines = response.read().decode().splitlines()
    event = next(line.split(": ", 1)[1] for line in lines if line.startswith("event: "))
    payload = next(line.split(": ", 1)[1] for line in lines if line.startswith("data: "))
    return event, json.loads(payload)


def test_named_endpoints(client):
    endpoints = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert set(endpoints) == {"/visualize", "/steps", "/compare", "/export", "/importance", "/induction", "/dk_lab",
                              "/qk_lab",
                              "/training", "/live_train", "/live_cancel", "/ping"}


def test_visualize_with_defaults(client):
    run, output, notes = client.predict(text="abc", api_name="/visualize")
    maps, masks = unpack(run)  # every kind, layer and head of the run
    assert run["tokens"]["source"] == ["a", "b", "c", "<eos>"] and maps["encoder.0.self_attn"].shape[1:] == (4, 4)
    assert {entry["kind"] for entry in run["kinds"]} == {"encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"}
    assert isinstance(output, str) and output and run["output"] in output
    # notes: the run's notes (Markdown) rendered to HTML by the server
    assert "Scores QKᵀ" in notes and notes == prose_html("\n\n".join(run["notes"])) and "<code>" in notes


def test_the_run_carries_each_stacks_rollout_and_flow(client):
    """Rollout and attention flow of both stacks (service.stacks) travel with the run: the package's numbers on the
    run's own maps, to the packing's quantisation (plus what quantising the maps moves the product)."""
    run = client.predict(text="hello", api_name="/visualize")[0]
    maps, _ = unpack(run)
    kinds = {entry["kind"]: entry for entry in run["kinds"]}
    for stack in ("encoder", "decoder"):
        entry = kinds[f"{stack}.self_attn"]["stack"]
        n = len(run["tokens"]["source" if stack == "encoder" else "target"])
        for name, expected in (("rollout", av.rollout(maps, stack)[0]),
                               ("flow", av.attention_flow(maps, stack, normalise=True)[0])):
            got = np.frombuffer(base64.b64decode(entry[name]), dtype="<u2").reshape(n, n) / run["quant"]
            np.testing.assert_allclose(got, expected, atol=1e-4)
    assert "stack" not in kinds["decoder.cross_attn"]


def test_visualize_untrained(client):
    run, output, notes = client.predict(**UNTRAINED, api_name="/visualize")
    assert output.startswith("(untrained model: no meaningful output")
    assert run["n_heads"] == 4 and all(entry["layers"] == 2 for entry in run["kinds"]) and "2 pad tokens" in notes
    assert run["settings"] == {"text": "hello", "model": "untrained", "checkpoint": None, "d_k": 16, "scale": "sqrt_dk",
                               "causal_mask": True, "padding_mask": True, "pad_tokens": 2, "d_model": 64, "n_heads": 4,
                               "heads_off": {}, "ablation": "zero"}
    maps, masks = unpack(run)
    assert maps["decoder.1.cross_attn"].shape == (4, 6, 8)  # [H, T = "hello" + <eos>, S = + 2 pads]
    assert not masks["decoder.cross_attn"][:, -2:].any() and (maps["decoder.1.cross_attn"][..., -2:] == 0).all()


def test_switches_change_the_maps(client):
    def maps(**changes):
        return client.predict(**{**UNTRAINED, **changes}, api_name="/visualize")[0]["kinds"]

    base = maps()
    assert maps(scale_mode="none") != base
    assert maps(padding_mask=False) != base
    assert maps(causal_mask=False)[1] != base[1]  # decoder self-attention
    assert maps(causal_mask=False)[0] == base[0]  # the encoder runs before the decoder: the same


def test_steps_compare_export(client):
    steps, text = client.predict(**UNTRAINED_ARGS, api_name="/steps")  # numbers, which the page draws
    assert "softmax" in text and steps["format"] == "attention_viz.steps/1" and prose_html(steps["text"]) == text
    assert (steps["kind"], steps["layer"], steps["head"]) == ("decoder.cross_attn", 1, 2)
    arrays = steps_arrays(steps)
    assert arrays["scores"].shape == (6, 8) and arrays["output"].shape == (6, 16)  # [T, S], [T, d_v]
    assert np.isneginf(arrays["masked"][:, -2:]).all() and (arrays["weights"][:, -2:] == 0).all()  # the pads
    np.testing.assert_allclose(arrays["weights"].sum(axis=1), 1, atol=1e-6)
    comparison, text = client.predict(**UNTRAINED_ARGS, comparison="padding_mask", api_name="/compare")
    assert "padding mask off" in text and comparison["labels"] == ["padding mask on", "padding mask off"]
    arrays = compare_arrays(comparison)
    np.testing.assert_array_equal(arrays["difference"], arrays["a"] - arrays["b"])
    assert (arrays["difference"][:, -2:] < 0).all()  # the pad keys: hidden with the mask on, seen with it off
    files = client.predict(**UNTRAINED_ARGS, colour_scale="per_head", api_name="/export")
    paths = [Path(f) for f in files]
    assert sorted(p.suffix for p in paths) == [".csv", ".html", ".npz", ".pdf", ".pdf", ".png", ".png", ".svg", ".svg"]
    npz = np.load(next(p for p in paths if p.suffix == ".npz"), allow_pickle=False)
    assert npz["decoder.1.cross_attn"].shape == (4, 6, 8)  # [H, T = "hello" + <eos>, S = "hello" + <eos> + 2 pads]
    # the files named by the picker's name of the model, in safe characters
    assert all(p.name.startswith("untrained-random-weights-d_model-64-h-4-d_k-16__hello__") for p in paths), paths


def test_compare_another_text_and_another_model(client):
    """The Compare tab's two runs: a − b where the tokens align (NaN, sent as null, where not), b in its own tokens."""
    head = dict(kind="encoder.self_attn", layer=1, head=0)
    pair, text = client.predict(text="attention", **head, comparison="text", other_text="attentive",
                                api_name="/compare")
    arrays = compare_arrays(pair)
    assert pair["pair"] and pair["queries_b"][7:9] == ["v", "e"] and "in b “v”, “e”" in text
    aligned = ~np.isnan(arrays["difference"])
    assert not aligned[7:9].any() and aligned[:7, :7].all()
    np.testing.assert_allclose(arrays["difference"][:7, :7], arrays["a"][:7, :7] - arrays["b"][:7, :7], atol=1e-6)
    pair, text = client.predict(text="hello", **head, comparison="model", other_model="copy/sqrt_dk",
                                api_name="/compare")
    # a and b named as the picker names them, never by its values ("reverse/sqrt_dk")
    assert pair["labels"] == ["reverse (trained with 1/√d_k), d_k = 16", "copy (trained with 1/√d_k), d_k = 16"]
    assert "Every token aligns" in pair["unaligned"] and "/sqrt_dk" not in text


def lab_beside(app_url: str, asked: object) -> tuple[int, object]:
    """The lab view's server function as the page calls it (POST /component_server/, no queue): status, answer."""
    config = json.loads(urllib.request.urlopen(app_url + "config", timeout=30).read())
    view = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "lab_view")
    body = json.dumps({"data": asked, "component_id": view, "fn_name": "lab_answer", "session_hash": "lab-test"})
    request = urllib.request.Request(app_url + "gradio_api/component_server/", data=body.encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.loads(response.read())


def test_the_labs_answer_beside_the_queue_is_the_same_as_dk_labs(client, app_url):
    """What the page gets beside the queue is what /dk_lab answers, value for value; a refusal gets null there (the
    page then asks /dk_lab, whose message says why), never a trace, and so does a d_k off the slider's powers of two
    (its numbers take tens of ms: /dk_lab computes them in its line)."""
    for d_k, n_keys, scaled in ((256, 64, False), (1, 1024, True), (4096, 2, True)):
        status, answer = lab_beside(app_url, {"d_k": d_k, "n_keys": n_keys, "scaled": scaled})
        assert status == 200 and answer == dict(zip(("view", "numbers"), client.predict(
            d_k=d_k, n_keys=n_keys, scaled=scaled, api_name="/dk_lab")))
    for refused in ({"d_k": 5000, "n_keys": 8, "scaled": True}, {"d_k": math.nan, "n_keys": 8, "scaled": True},
                    {"d_k": 10**400, "n_keys": 8, "scaled": True}, "x" * 1000, None,
                    {"d_k": 3, "n_keys": 1024, "scaled": True}, {"d_k": 100, "n_keys": 8, "scaled": False}):
        assert lab_beside(app_url, refused) == (200, None), refused
    assert client.predict(d_k=3, n_keys=1024, scaled=True, api_name="/dk_lab")[1]["data"][0][3] == "3 and 1"


@pytest.mark.parametrize("changes, message", [
    ({"comparison": "text", "other_text": ""}, "Write the second text (b) to compare with"),
    ({"comparison": "text", "other_text": "x" * 100_000}, "Second text (b): Text is 100000 characters; the maximum"),
    ({"comparison": "model", "other_model": "hub:nowhere"}, "Second model (b): Unknown model 'hub:nowhere'"),
    ({"comparison": "model", "other_model": ""}, "Pick the second model (b) to compare with"),
])
def test_a_bad_side_b_gets_a_clear_message(client, changes, message):
    with pytest.raises(AppError, match=re.escape(message)):
        client.predict(text="attention", kind="encoder.self_attn", layer=1, head=0, **changes, api_name="/compare")
    assert client.predict(text="attention", kind="encoder.self_attn", layer=1, head=0, comparison="scaling",
                          api_name="/compare")[0]["labels"]  # still serving


def test_induction_heads_on_demand(client):
    text = client.predict(text="hello", api_name="/induction")
    assert "16 random tokens repeated twice" in text and "<table>" in text and "Strongest:" in text
    assert "Induction heads of <code>reverse (trained with 1/√d_k), d_k = 16</code>" in text  # never its value


def test_dk_lab(client):
    data, numbers = client.predict(d_k=256, n_keys=64, scaled=False, api_name="/dk_lab")
    assert (data["d_k"], data["n_keys"], data["scaled"]) == (256, 64, False)
    histogram = data["histogram"]
    assert len(histogram["edges"]) == len(histogram["counts"]) + 1 == len(histogram["theory"]) + 1
    assert histogram["edges"][-1] == pytest.approx(5 * 16) and histogram["tv_distance"] < 0.05  # ±5 √d_k, and the law
    assert len(data["query"]["weights"]) == 64 and data["sweep"]["d_k"][-1] == 4096
    variance = numbers["data"][0]
    assert variance[1] == pytest.approx(256, rel=0.05) and variance[2] == pytest.approx(1, rel=0.05)


@pytest.mark.parametrize("changes, message", [
    ({"text": "x" * (MAX_TEXT + 1)}, f"Text is {MAX_TEXT + 1} characters; the maximum is {MAX_TEXT}."),
    ({"text": "x" * 100_000}, f"Text is 100000 characters; the maximum is {MAX_TEXT}."),
    ({"text": "héllo 😀"}, "Unknown characters: 'é', '😀'."),
    ({"layer": 5}, "layer must be between 0 and 1, got 5"),  # (/steps)
    ({"head": 9}, "head must be between 0 and 3, got 9"),    # (/steps)
    ({"d_k": "sixteen"}, "d_k must be a whole number, got 'sixteen'"),
    ({"model": "../../etc/passwd"}, "Unknown model '../../etc/passwd'"),
    ({"d_k": 1024, "n_heads": 16}, "heads × d_k is 16 × 1024 = 16384"),
])
def test_bad_inputs_get_a_clear_error_and_the_app_keeps_serving(client, changes, message):
    with pytest.raises(AppError) as error:
        if set(changes) & {"layer", "head"}:
            client.predict(**{**UNTRAINED_ARGS, **changes}, api_name="/steps")
        else:
            client.predict(**{**UNTRAINED, **changes}, api_name="/visualize")
    assert message in str(error.value)
    assert client.predict(d_k=4, n_keys=8, scaled=True, api_name="/dk_lab")[1]["data"]


def as_list(**values):
    return [values[k] for k in UNTRAINED]


def test_raw_http_non_finite_numbers_are_refused(app_url):
    for name in ("d_k", "custom_factor", "pad_tokens"):
        event, data = raw_call(app_url, "visualize", as_list(**{**UNTRAINED, name: math.nan}))
        assert event == "error" and "must be a finite number" in data["error"], (name, data)
    event, data = raw_call(app_url, "steps", [*as_list(**UNTRAINED), "encoder.self_attn", math.nan, 0])
    assert event == "error" and "layer must be a finite number" in data["error"]
    event, data = raw_call(app_url, "dk_lab", [math.nan, 16, True])
    assert event == "error" and "d_k must be a finite number" in data["error"]


def test_raw_http_integers_beyond_any_float_get_a_message(app_url):
    """JSON integers of any size: refused by the range check, the number cut, never an error with no message."""
    for name in ("d_k", "custom_factor", "pad_tokens", "d_model", "n_heads"):
        event, data = raw_call(app_url, "visualize", as_list(**{**UNTRAINED, name: 10**400}))
        assert event == "error" and "must be between" in data["error"] and len(data["error"]) < 120, (name, data)
    event, data = raw_call(app_url, "dk_lab", [10**400, 16, True])
    assert event == "error" and data["error"].startswith("d_k must be between 1 and 4096, got 1000")
    event, data = raw_call(app_url, "visualize", as_list(**{**UNTRAINED, "model": "x" * 100_000}))
    assert event == "error" and data["error"].startswith("Unknown model 'xxx") and len(data["error"]) < 400


@pytest.mark.parametrize("api_name, sent", [("visualize", ["attention"]), ("visualize", []), ("dk_lab", [16]),
                                            ("live_train", ["reverse", "8"])])
def test_raw_http_calls_short_of_values_are_told_how_many(app_url, api_name, sent):
    event, data = raw_call(app_url, api_name, sent)
    assert event == "error" and data["error"].startswith(f"The request sent {len(sent)} of the "), data
    assert raw_call(app_url, "dk_lab", [4, 8, True])[0] == "complete"


@pytest.mark.parametrize("route", ["call", "call/v2", "run", "api"])
def test_a_call_to_an_endpoint_that_does_not_exist_is_a_404_that_says_so(app_url, route):
    """Gradio answers these with a bare 500 (and a trace in its log); the app says what is missing."""
    for name, shown in (("nonexistent", "'nonexistent'"), ("x" * 300, "'" + "x" * 38 + "…")):
        request = urllib.request.Request(f"{app_url}gradio_api/{route}/{name}", data=b'{"data": [1]}',
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=30)
        assert error.value.code == 404
        assert json.load(error.value)["detail"] == f"No endpoint named {shown}; the app's \"Use via API\" page lists them."
    request = urllib.request.Request(f"{app_url}gradio_api/run/predict", data=b'{"data": [], "fn_index": 9999}',
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=30)
    assert error.value.code == 404 and json.load(error.value)["detail"] == "No event with fn_index 9999."
    assert raw_call(app_url, "dk_lab", [4, 8, True])[0] == "complete"  # the named ones still answer


def test_the_readiness_endpoint_answers_ok_with_the_models_and_nothing_else(app_url):
    """GET /healthz (the Dockerfile's HEALTHCHECK, deploy/kubernetes' probes): 200, JSON, never cached; the models
    the server offers; no other method; the app's endpoints unaffected."""
    import httpx

    with httpx.Client(timeout=10) as http:
        answer = http.get(app_url + "healthz")
        head = http.head(app_url + "healthz")
        post = http.post(app_url + "healthz", json={})
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.headers["cache-control"] == "no-store"
    catalog = Catalog()
    assert answer.json() == {"status": "ok", "families": len(catalog.families), "checkpoints": len(catalog.cards),
                             "real_models": {}}
    assert head.status_code == 200 and post.status_code == 405 and "Traceback" not in post.text
    assert raw_call(app_url, "dk_lab", [4, 8, True])[0] == "complete"


def test_raw_http_booleans_are_coerced(app_url):
    event, data = raw_call(app_url, "visualize", as_list(**{**UNTRAINED, "causal_mask": "false", "padding_mask": 1}))
    assert event == "complete" and "causal mask off" in data[2] and data[0]["settings"]["causal_mask"] is False
    event, data = raw_call(app_url, "visualize", as_list(**{**UNTRAINED, "causal_mask": "perhaps"}))
    assert event == "error" and data["error"] == "causal mask must be true or false, got 'perhaps'"


@pytest.mark.parametrize("path", ["app.py", str(Path(__file__).resolve().parents[2] / "app.py"), "/etc/passwd",
                                  "attention_viz/data/models", "attention_viz/data/checkpoints.py"])
def test_the_file_route_serves_no_path_a_user_names(app_url, path):
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(f"{app_url}gradio_api/file={path}", timeout=10)
    assert error.value.code == 403


def test_the_readmes_client_example_runs_against_the_app(app_url, tmp_path):
    """The README's gradio_client example, pointed at this server, run from another folder."""
    import re
    import subprocess
    import sys

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "gradio_client" in b]
    assert blocks, "the README has no gradio_client example"
    for block in blocks:
        assert "http://127.0.0.1:7860/" in block, block
        code = block.replace("http://127.0.0.1:7860/", app_url)
        result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{code}\n---\n{result.stderr[-3000:]}"


def test_visualize_with_a_study_model_and_its_compatibility(client):
    run, output, notes = client.predict(text="hello", model="study/scaled_dot", d_k=100, api_name="/visualize")
    assert (run["settings"]["model"], run["settings"]["checkpoint"], run["settings"]["d_k"]) == (
        "study/scaled_dot", "reverse_scaled_dot_dk128", 128)  # compatibility left out, as an old client does
    assert "compatibility study, seed 0: scaled dot product" in notes and "held-out exact match" in notes
    run, output, notes = client.predict(text="hello", model="study/scaled_dot", d_k=100, compatibility="additive",
                                        api_name="/visualize")
    assert run["settings"]["checkpoint"] == "reverse_additive_dk128" and output == "olleh"
    maps, _ = unpack(run)
    assert np.abs(maps["decoder.0.cross_attn"].sum(-1) - 1).max() < 1e-3 and "Scaling does not apply" in notes
    with pytest.raises(AppError, match="compatibility function must be one of"):
        client.predict(text="hello", model="study/dot", compatibility="cosine", api_name="/visualize")


def test_raw_http_takes_the_compatibility_last_or_not_at_all(app_url):
    values = as_list(**{**UNTRAINED, "model": "study/dot", "d_k": 32})
    event, data = raw_call(app_url, "visualize", [*values, "additive"])
    assert event == "complete" and data[0]["settings"]["checkpoint"] == "reverse_additive_dk32"
    event, data = raw_call(app_url, "visualize", values)  # an old client's ten values
    assert event == "complete" and data[0]["settings"]["checkpoint"] == "reverse_dot_dk32"
