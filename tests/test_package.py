"""The package as a user installs it: a wheel with the shipped models, and the README's Python run from any folder."""

import re
import subprocess
import sys
import zipfile
from pathlib import Path

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


def test_the_public_api_is_importable_from_the_top():
    import attention_viz

    for name in attention_viz.__all__:
        assert getattr(attention_viz, name) is not None, name
    assert attention_viz.list_models(), "no shipped models found through the installed package"
    assert "show" in attention_viz.__all__ and attention_viz.show is attention_viz.explorer.show
