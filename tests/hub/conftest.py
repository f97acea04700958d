"""Small real-format models of every supported family, saved offline once per session (devtools.hub_models), with
the Hub switched off for every test here."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from devtools.hub_models import FAMILIES, save_tiny  # noqa: E402


@pytest.fixture(autouse=True)
def hub_off(monkeypatch):
    """No test here may reach the Hub: what it loads, it saved itself."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_folders(tmp_path_factory) -> dict:
    """Family -> the folder of its small model (random weights, its real tokenizer)."""
    root = tmp_path_factory.mktemp("hub-models")
    return {family: save_tiny(family, root / f"tiny-{family}") for family in FAMILIES}
