"""Small real-format models of every supported family, saved offline once per session (devtools.hub_models), with
the Hub switched off for every test here: what a test loads, the session saved itself."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from devtools.hub_models import FAMILIES, save_tiny  # noqa: E402


@pytest.fixture(autouse=True)
def hub_off(monkeypatch):
    """No test here may reach the Hub (building the folders needs none: save_tiny reads nothing from it)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """One torch thread for each module here: these models are tiny, and a second thread only costs (2 cores)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory):
    """tiny_folder(family) -> the folder of its small model (random weights, its real tokenizer), built once."""
    root = tmp_path_factory.mktemp("hub-models")
    built = {}

    def folder(family: str):
        if family not in built:
            built[family] = save_tiny(family, root / f"tiny-{family}")
        return built[family]

    return folder


@pytest.fixture(scope="session")
def tiny_folders(tiny_folder) -> dict:
    """Family -> the folder of its small model, every family built."""
    return {family: tiny_folder(family) for family in FAMILIES}
