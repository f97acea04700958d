"""Checkpoints: safetensors round trip, pickles refused without running, registry names never escape the folder."""

import dataclasses
import json
import pickle
import random
from pathlib import Path

import pytest
import torch

import attention_viz
from attention_viz.data.checkpoints import (
    CheckpointError,
    UnsafeCheckpointError,
    count_parameters,
    list_models,
    load_checkpoint,
    load_model,
    save_checkpoint,
)
from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer
from attention_viz.data.tokenizer import VOCAB_SIZE
from attention_viz.train.trainer import TrainSettings


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


# --- damaged files and cards: CheckpointError naming the file ------------------------------------------------

def saved(tmp_path, name="m", card=None):
    save_checkpoint(tiny_model(), card or {"task": "copy", "scale": "sqrt_dk"}, tmp_path / name)
    return tmp_path / f"{name}.safetensors", tmp_path / f"{name}.json"


def test_checkpoint_error_is_exported_and_a_value_error():
    assert attention_viz.CheckpointError is attention_viz.data.CheckpointError is CheckpointError
    assert "CheckpointError" in attention_viz.__all__ and "CheckpointError" in attention_viz.data.__all__
    assert issubclass(CheckpointError, ValueError) and issubclass(UnsafeCheckpointError, CheckpointError)


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[:-1], "corrupt or truncated"),           # the last byte of the last tensor is missing
    (lambda data: data[: len(data) // 2], "corrupt or truncated"),
    (lambda data: data[:40], "truncated"),                      # inside the header
    (lambda data: b"", "empty"),
    (lambda data: bytes(random.Random(0).randrange(256) for _ in range(len(data))), "not a safetensors file"),
    (lambda data: data[:9] + b"!" * (int.from_bytes(data[:8], "little") - 1) + data[8 + int.from_bytes(data[:8], "little"):],
     "corrupt"),                                                # the header's JSON is garbage, the sizes right
])
def test_damaged_weights_raise_checkpoint_error_naming_the_file(tmp_path, damage, message):
    weights, _ = saved(tmp_path)
    weights.write_bytes(damage(weights.read_bytes()))
    for path in (tmp_path / "m", weights):
        with pytest.raises(CheckpointError, match=message) as error:
            load_checkpoint(path)
        assert str(weights) in str(error.value)


@pytest.mark.parametrize("text, message", [
    ("[]", "does not hold a JSON object .it holds a list"),
    ("{bad json", "is not valid JSON"),
    ("", "is not valid JSON"),
    ('"a string"', "does not hold a JSON object"),
    ('{"task": "copy"}', "does not hold a valid TransformerConfig"),
    ('{"config": {"d_model": -1}}', "does not hold a valid TransformerConfig"),
    ('{"config": [1, 2]}', "does not hold a valid TransformerConfig"),
])
def test_cards_that_are_not_json_objects_raise_checkpoint_error_naming_the_file(tmp_path, text, message):
    _, card_path = saved(tmp_path)
    card_path.write_text(text)
    with pytest.raises(CheckpointError, match=message) as error:
        load_checkpoint(tmp_path / "m")
    assert str(card_path) in str(error.value)
    if "config" not in text:
        return
    with pytest.raises(CheckpointError, match=message):  # the registry does not list it either
        list_models(tmp_path)


def test_card_bytes_that_are_not_utf8_raise_checkpoint_error(tmp_path):
    _, card_path = saved(tmp_path)
    card_path.write_bytes(bytes(range(128, 256)))
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(tmp_path / "m")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        list_models(tmp_path)


def trainer_card(model: Transformer) -> dict:
    """What the trainer writes: its settings, and copies of some at the top level."""
    c = model.config
    settings = TrainSettings(task="copy", d_k=c.d_k, d_v=c.d_v, d_model=c.d_model, n_heads=c.n_heads,
                             n_layers=c.n_encoder_layers, d_ff=c.d_ff, dropout=c.dropout, max_len=12, steps=5)
    assert settings.model_config() == c  # the tiny model is what these settings train
    return {"task": "copy", "scale": "sqrt_dk", "max_len": 12, "seed": 0, "steps": 5,
            "settings": dataclasses.asdict(settings)}


@pytest.mark.parametrize("edit, field", [
    (lambda card: card["config"].update(d_model=32), "d_model"),
    (lambda card: card["config"].update(n_heads=2, d_k=16), "n_heads"),
    (lambda card: card["config"].update(d_k=16, n_heads=4), "d_k"),
    (lambda card: card["config"].update(d_v=8), "d_v"),
    (lambda card: card["config"].update(d_ff=64), "d_ff"),
    (lambda card: card["config"].update(dropout=0.5), "dropout"),
    (lambda card: card["config"].update(n_decoder_layers=2), "n_decoder_layers.*n_layers"),
    (lambda card: card["settings"].update(n_layers=3), "n_encoder_layers.*n_layers"),
    (lambda card: card["settings"].update(max_len=30), "max_len"),
    (lambda card: card.update(task="reverse"), "task"),
    (lambda card: card.update(scale="none"), "scale"),
    (lambda card: card["config"].update(vocab_size=120), "vocab_size"),
    (lambda card: card.update(n_params=5), "n_params"),
])
def test_a_card_that_contradicts_its_own_settings_is_refused_naming_the_field(tmp_path, edit, field):
    model = tiny_model()
    saved_card = trainer_card(model)
    _, card_path = saved(tmp_path, card=saved_card)
    loaded, card = load_checkpoint(tmp_path / "m")  # as written, the card is consistent
    assert card["settings"]["d_k"] == loaded.config.d_k and [c["name"] for c in list_models(tmp_path)] == ["m"]
    card = json.loads(card_path.read_text())
    edit(card)
    card_path.write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match=field) as error:
        load_checkpoint(tmp_path / "m")
    assert str(card_path) in str(error.value)
    if field != "n_params":  # the weights are needed for that one
        with pytest.raises(CheckpointError, match=field):
            list_models(tmp_path)


def test_every_shipped_model_still_loads():
    cards = list_models()
    assert len(cards) >= 4
    for card in cards:
        model, loaded = load_model(card["name"], device="cpu")
        assert loaded["config"] == model.config.to_dict() and VOCAB_SIZE == model.config.vocab_size
