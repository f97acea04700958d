"""The package as a user installs it: a wheel with the shipped models, and the README's Python run from any folder
(its real-model examples on a small model of every kind they name, offline)."""

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_python_blocks(client: bool = False) -> list[str]:
    """The Python examples of the README and docs/package.md: those that talk to a running app (gradio_client), or
    the others."""
    pages = (ROOT / "README.md").read_text() + (ROOT / "docs" / "package.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", pages, flags=re.S)
    return [block for block in blocks if ("gradio_client" in block) == client]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    if result.returncode != 0:
        pytest.fail(f"pip wheel failed: {result.stderr[-2000:]}")
    return next(out.glob("attention_viz-*.whl"))


def test_the_wheel_holds_every_shipped_model_and_every_layer(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    models = ROOT / "attention_viz" / "data" / "models"
    shipped = sorted(p.relative_to(models).as_posix() for p in models.rglob("*")
                     if p.suffix in (".json", ".safetensors", ".npz"))  # the study's members and snapshots too
    assert shipped, "no shipped models in the tree"
    assert {f"attention_viz/data/models/{name}" for name in shipped} <= names
    for layer in ("core", "fast", "hub", "data", "draw", "explorer", "labview", "train", "service", "server", "webui"):
        assert f"attention_viz/{layer}/__init__.py" in names, layer
    # the browser side, every script the app's page loads once (webui/scripts.py; the notebook view inlines them)
    from attention_viz.webui.scripts import SCRIPTS
    assert {f"attention_viz/{package}/static/{name}" for package, name in SCRIPTS} <= names
    assert {f"attention_viz/explorer/static/{name}" for name in ("explorer.css", "steps.css", "autosize.js")} <= names
    assert {"attention_viz/labview/static/lab.js", "attention_viz/labview/static/lab.css"} <= names  # the lab's
    assert "attention_viz/data/lab_sweeps.json.gz" in names  # the lab's sweep for every number of keys
    assert not any(name.startswith(("tests/", "benchmarks/", "devtools/")) for name in names)


def test_the_readme_python_runs_from_another_folder(tmp_path):
    blocks = readme_python_blocks()
    assert blocks, "the README has no Python example"
    for block in blocks:
        result = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, f"{block}\n---\n{result.stderr[-3000:]}"


# The Hub ids the README's real-model examples name, and the small model of the same kind standing in for each
# (devtools.hub_models: random weights, the family's real tokenizer, saved offline): (family, layers).
STAND_INS = {"Helsinki-NLP/opus-mt-en-de": ("marian", 6), "gpt2": ("gpt2", 2),
             "HuggingFaceTB/SmolLM2-135M": ("llama", 2), "bert-base-uncased": ("bert", 2),
             "facebook/deit-tiny-distilled-patch16-224": ("deit", 12)}
LOADS = re.compile(r'load_pretrained\("([^"]+)"\)(.*)')


def readme_real_model_blocks() -> list[str]:
    """The README's Python that loads a real model (```py blocks)."""
    blocks = re.findall(r"```py\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    return [block for block in blocks if "load_pretrained(" in block]


def variants(block: str, folder) -> dict[str, str]:
    """The block once for every model kind it names: each load_pretrained("id") line run with the stand-in of its id
    and, in turn, of every other id its comment names ("or ..."), the other lines' loads with their own."""
    lines = block.splitlines()
    loads = {i: LOADS.search(line) for i, line in enumerate(lines)}
    loads = {i: found for i, found in loads.items() if found}
    assert loads and all(found.group(1) in STAND_INS for found in loads.values()), block
    out = {}
    for i, found in loads.items():
        named = [found.group(1)] + [name for name in re.findall(r'"([^"]+)"', found.group(2)) if name in STAND_INS]
        for name in named:
            chosen = dict.fromkeys(loads, None) | {i: name}
            text = [LOADS.sub(f'load_pretrained(r"{folder(chosen[j] or loads[j].group(1))}")', line)
                    if j in loads else line for j, line in enumerate(lines)]
            out.setdefault("\n".join(text), " + ".join(chosen[j] or loads[j].group(1) for j in loads))
    return {named: code for code, named in out.items()}  # each different run once


@pytest.mark.integration
def test_the_readme_real_model_examples_run_on_every_kind_they_name(tmp_path):
    """Each real-model example as written, on a small model of each kind it names (an encoder-decoder, a decoder, an
    encoder), offline, from another folder: nothing ends in an error."""
    pytest.importorskip("transformers")
    from PIL import Image

    from devtools.hub_models import IMAGE_FAMILIES, save_tiny, save_tiny_image

    built = {}

    def folder(name: str) -> Path:
        if name not in built:
            family, layers = STAND_INS[name]
            where = tmp_path / "models" / f"tiny-{family}-{layers}"
            built[name] = (save_tiny_image(family, where, layers=layers, image_size=224, patch_size=16)
                           if family in IMAGE_FAMILIES else save_tiny(family, where, layers=layers))
        return built[name]

    y, x = np.mgrid[:300, :400]  # the picture the image example reads, a gradient standing in for a cat
    Image.fromarray(np.stack([x % 256, y % 256, (x + y) % 256], -1).astype(np.uint8)).save(tmp_path / "cat.jpg")

    blocks = readme_real_model_blocks()
    assert blocks, "the README has no real-model example"
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    ran = set()
    for block in blocks:
        for named, code in variants(block, folder).items():
            result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                                    timeout=300, env=environment)
            assert result.returncode == 0, f"{named}\n{code}\n---\n{result.stderr[-3000:]}"
            ran |= {STAND_INS[name][0] for name in named.split(" + ")}
    assert ran == {"marian", "gpt2", "llama", "bert", "deit"}  # encoder-decoder, decoder (two), encoder, images


def test_the_public_api_is_importable_from_the_top():
    import attention_viz

    for name in attention_viz.__all__:
        assert getattr(attention_viz, name) is not None, name
    assert attention_viz.list_models(), "no shipped models found through the installed package"
    assert "show" in attention_viz.__all__ and attention_viz.show is attention_viz.explorer.show
