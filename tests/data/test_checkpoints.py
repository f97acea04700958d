"""Checkpoints: safetensors round trip, pickles refused without running, registry names never escape the folder."""

import json
import pickle
from pathlib import Path

import pytest
import torch

from attention_viz.data.checkpoints import (
    UnsafeCheckpointError,
    count_parameters,
    list_models,
    load_checkpoint,
    load_model,
    save_checkpoint,
)
from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer


class CodeOnUnpickle:
    """A pickle payload that creates a file when it is unpickled: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def tiny_model(d_k: int = 8) -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig.small(
        vocab_size=99, n_encoder_layers=1, n_decoder_layers=1, d_model=16, d_k=d_k, d_v=4, d_ff=32
    )
    return Transformer(cfg).eval()


def test_round_trip_keeps_weights_outputs_and_card(tmp_path):
    model = tiny_model()
    path = save_checkpoint(model, {"task": "copy", "scale": "none"}, tmp_path / "tiny")
    assert path == tmp_path / "tiny.safetensors" and (tmp_path / "tiny.json").exists()
    loaded, card = load_checkpoint(tmp_path / "tiny.json")
    assert card["name"] == "tiny" and card["task"] == "copy" and card["scale"] == "none"
    assert TransformerConfig(**card["config"]) == model.config == loaded.config
    assert card["n_params"] == count_parameters(model) == count_parameters(loaded)
    assert not loaded.training
    src, tgt = torch.randint(4, 99, (2, 5)), torch.randint(4, 99, (2, 4))
    assert torch.equal(model(src, tgt)[0], loaded(src, tgt)[0])
    assert loaded.generator.weight is loaded.src_embed.lookup.weight  # tied embedding survives the round trip


def test_saving_twice_writes_the_same_bytes(tmp_path):
    model = tiny_model()
    save_checkpoint(model, {"task": "copy", "scale": "sqrt_dk"}, tmp_path / "a")
    save_checkpoint(model, {"task": "copy", "scale": "sqrt_dk"}, tmp_path / "b")
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    assert not list(tmp_path.glob("*.partial"))


def test_pickled_code_is_refused_without_running(tmp_path):
    marker = tmp_path / "code_ran"
    save_checkpoint(tiny_model(), {"task": "copy", "scale": "sqrt_dk"}, tmp_path / "evil")
    with open(tmp_path / "evil.safetensors", "wb") as file:  # a pickle disguised as safetensors
        pickle.dump({"weights": CodeOnUnpickle(marker)}, file)
    torch.save({"weights": CodeOnUnpickle(marker)}, tmp_path / "evil.pt")  # torch's zip-of-pickles format
    (tmp_path / "zip.json").write_text((tmp_path / "evil.json").read_text())
    torch.save({"weights": CodeOnUnpickle(marker)}, tmp_path / "zip.safetensors")

    for path in (tmp_path / "evil", tmp_path / "evil.safetensors", tmp_path / "evil.pt", tmp_path / "zip"):
        with pytest.raises(UnsafeCheckpointError, match="safetensors"):
            load_checkpoint(path)
    with pytest.raises(UnsafeCheckpointError):
        load_model("evil", device="cpu", directory=tmp_path)
    assert not marker.exists()

    pickle.loads((tmp_path / "evil.safetensors").read_bytes())  # the payload is live: unpickling runs it
    assert marker.exists()


def test_card_that_does_not_match_the_weights_is_an_error(tmp_path):
    save_checkpoint(tiny_model(d_k=8), {"task": "copy", "scale": "sqrt_dk"}, tmp_path / "m")
    card = json.loads((tmp_path / "m.json").read_text())
    card["config"]["d_k"] = 12
    (tmp_path / "m.json").write_text(json.dumps(card))
    with pytest.raises(ValueError, match="does not match"):
        load_checkpoint(tmp_path / "m")
    card["config"]["not_a_field"] = 1
    (tmp_path / "m.json").write_text(json.dumps(card))
    with pytest.raises(ValueError, match="TransformerConfig"):
        load_checkpoint(tmp_path / "m")


def test_registry_lists_and_loads_by_name_only(tmp_path):
    save_checkpoint(tiny_model(), {"task": "reverse", "scale": "sqrt_dk"}, tmp_path / "b")
    save_checkpoint(tiny_model(), {"task": "copy", "scale": "none"}, tmp_path / "a")
    (tmp_path / "notes.json").write_text("{}")  # a JSON file without weights is not a model
    assert [card["name"] for card in list_models(tmp_path)] == ["a", "b"]
    model, card = load_model("b", device="auto", directory=tmp_path)
    assert card["task"] == "reverse" and isinstance(model, Transformer)

    outside = tmp_path / "models"
    outside.mkdir()
    for bad in ("../b", "models/../b", "..", "/etc/passwd", "a/b", "", "b.json", ".hidden"):
        with pytest.raises(ValueError, match="invalid model name"):
            load_model(bad, directory=outside)
    with pytest.raises(ValueError, match="no model named 'missing'.*known: a, b"):
        load_model("missing", directory=tmp_path)
