"""Names people know: wherever the app names a model to a person (a run's title and notes, the steps and comparisons,
Compare's a and b, induction and importance, every export's file names, records and contents), it says the name the
model picker shows, never the picker's internal value ("reverse/sqrt_dk", "hub:.cache-minilm"): for every trained
family, the study's, the untrained model, and real models of each kind, one set up under a cache folder's name.
Export file names stay safe (ASCII letters, digits, "_", "." and "-"; never hidden)."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from attention_viz.service.texts import file_name

SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
REAL = {"bert": ".cache-minilm", "gpt2": "tiny-gpt2", "marian": "tiny-marian"}  # family -> the folder's name


@pytest.fixture(scope="module")
def views(tmp_path_factory, one_thread):
    pytest.importorskip("transformers")
    from attention_viz.service.catalog import Catalog
    from attention_viz.service.runs import Runs
    from attention_viz.service.views import Views
    from devtools.hub_models import save_tiny

    os.environ["HF_HUB_OFFLINE"] = "1"
    root = tmp_path_factory.mktemp("names")
    return Views(Runs(Catalog(hub_models=[str(save_tiny(family, root / name)) for family, name in REAL.items()])))


def entries(views):
    return {entry.key: entry.label for entry in views.runs.catalog.entries()}


def settings_of(views, key: str, **switches):
    text = "the cat sat" if key.startswith("hub:") else "attention"
    return views.runs.settings(text, key, views.runs.catalog.default_d_k(key), switches.get("scale", "sqrt_dk"))


def shown(payload) -> list[str]:
    """Every string of a payload a person reads: titles, notes, texts, labels (not the machine fields: "model", the
    settings record, the numbers)."""
    if isinstance(payload, str):
        return [payload]
    if isinstance(payload, dict):
        return [text for name, value in payload.items() if name not in ("model", "settings", "maps", "data", "format")
                for text in shown(value)]
    if isinstance(payload, (list, tuple)):
        return [text for value in payload for text in shown(value)]
    return []


def no_key(texts: list[str], keys: dict[str, str], label: str) -> None:
    """No picker value appears in these texts outside a picker label (the values that are not plain words: the
    untrained model's "untrained" is the word its label and notes use)."""
    for text in texts:
        for key in keys:
            if "/" in key or ":" in key:
                assert key not in text.replace(label, ""), (key, text[:300])


def test_the_picker_labels_name_every_kind_and_no_key_is_one(views):
    keys = entries(views)
    assert {"reverse/sqrt_dk", "reverse/none", "study/dot", "untrained", "hub:.cache-minilm", "hub:tiny-gpt2",
            "hub:tiny-marian"} <= keys.keys()
    assert keys["hub:.cache-minilm"] == ".cache-minilm (real model)"
    for key, label in keys.items():
        assert key not in label or key == "untrained", (key, label)


@pytest.mark.parametrize("key", ["reverse/sqrt_dk", "reverse/none", "study/additive", "untrained",
                                 "hub:.cache-minilm", "hub:tiny-gpt2", "hub:tiny-marian"])
def test_a_run_its_steps_comparison_and_induction_name_the_model_as_the_picker_does(views, key):
    keys = entries(views)
    label = keys[key]
    s = settings_of(views, key)
    assert s.name.startswith(label)
    view = views.visualize(s)
    assert view.run["title"].endswith(f" on {s.name}")
    kind = "decoder.self_attn" if key == "hub:tiny-gpt2" else "encoder.self_attn"
    texts = [view.info, view.output, *shown(view.run)]
    for payload, text in (views.steps(s, kind, 0, 0), views.compare(s, "scaling", kind, 0, 0)):
        texts += [text, *shown(payload)]
    induction = views.induction.scores(s)
    assert f"Induction heads of `{s.name}`" in induction["text"]
    texts += shown(induction)
    no_key(texts, keys, label)


@pytest.mark.parametrize("key", ["reverse/none", "study/dot", "untrained", "hub:.cache-minilm"])
def test_exports_name_the_model_as_the_picker_does_in_safe_file_names(views, key):
    keys = entries(views)
    s = settings_of(views, key)
    files = views.export(s, "encoder.self_attn", 0, 0)
    stem = file_name(s.name)
    assert SAFE.fullmatch(stem) and stem.startswith(file_name(keys[key]))  # the label's own words first
    for path in files:
        assert SAFE.fullmatch(path.name) and path.name.startswith(stem + "__"), path.name
        if path.suffix in (".csv", ".svg", ".html"):
            text = path.read_text()
            no_key([text.replace(json.dumps(key), "").replace(f'"model": "{key}"', "")], keys, keys[key])
            if path.suffix != ".html":  # the page's payload holds the settings record (the API's values) too
                assert s.name in text or s.name.replace("&", "&amp;") in text, path.name
        if path.suffix == ".png":
            chunks = path.read_bytes()
            assert s.name.encode() in chunks and key.encode() not in chunks.replace(s.name.encode(), b"")
        if path.suffix == ".npz":
            with np.load(path) as saved:
                record = json.loads(str(saved["settings"]))
            assert record["name"] == s.name and record["model"] == key  # the API's value beside the name


def test_compare_another_model_labels_a_and_b_by_their_picker_names(views):
    keys = entries(views)
    a, b = settings_of(views, "reverse/sqrt_dk"), settings_of(views, "reverse/none")
    payload, text = views.compare_pair(a, b, "model", "encoder.self_attn", 0, 0)
    assert payload["labels"] == [a.name, b.name] and a.name != b.name
    assert f"a = `{a.name}`, b = `{b.name}`" in text
    no_key([text, *shown(payload)], keys, "")
    real_a, real_b = settings_of(views, "hub:.cache-minilm"), settings_of(views, "hub:tiny-marian")
    real_b = views.runs.settings(real_a.text, "hub:tiny-marian", real_b.d_k)
    payload, text = views.compare_pair(real_a, real_b, "model", "encoder.self_attn", 0, 0)
    assert payload["labels"] == [".cache-minilm (real model)", "tiny-marian (real model)"]
    no_key([text, *shown(payload)], keys, "")


def test_importance_titles_and_its_csv_name_the_model_as_the_picker_does(views):
    keys = entries(views)
    for key in ("reverse/none", "hub:tiny-gpt2"):
        s = settings_of(views, key)
        data = views.heads.importance(s)
        assert data["title"].startswith(f"Which heads matter: {s.name} on ")
        path = views.heads.csv_file(s)
        name = os.path.basename(path)
        assert SAFE.fullmatch(name) and name.startswith(file_name(s.name) + "__head_importance_")
        no_key([*shown(data), open(path).read()], keys, "")


@pytest.mark.parametrize("name, expected", [
    ("reverse (trained with 1/√d_k), d_k = 16", "reverse-trained-with-1-sqrtd_k-d_k-16"),
    (".cache-minilm (real model)", "cache-minilm-real-model"),
    ("Helsinki-NLP/opus-mt-en-de (real model)", "Helsinki-NLP-opus-mt-en-de-real-model"),
    ("../../etc/passwd", "etc-passwd"), ("東京 (real model)", "real-model"), ("√", "sqrt"), ("", "model"),
    ("...", "model"), ("a" * 300, "a" * 96),
])
def test_a_file_name_is_safe_whatever_the_name(name, expected):
    assert file_name(name) == expected and SAFE.fullmatch(file_name(name))
