"""The compatibility and init fields survive a checkpoint round trip; cards written before them still load."""

import json

import torch

from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer
from attention_viz.data.checkpoints import list_models, load_checkpoint, load_model, save_checkpoint


def test_an_additive_unit_qk_model_round_trips(tmp_path):
    cfg = TransformerConfig.small(vocab_size=30, n_encoder_layers=1, n_decoder_layers=1, d_model=16, d_k=8, d_v=4,
                                  d_ff=32, compatibility="additive", init="unit_qk")
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    save_checkpoint(model, {"task": "copy", "scale": "sqrt_dk", "compatibility": "additive"}, tmp_path / "add")
    loaded, card = load_checkpoint(tmp_path / "add")
    assert loaded.config == cfg
    assert (card["config"]["compatibility"], card["config"]["init"]) == ("additive", "unit_qk")
    src, tgt = torch.randint(3, 30, (2, 5)), torch.randint(3, 30, (2, 4))
    (a, maps_a), (b, maps_b) = model(src, tgt), loaded(src, tgt)
    assert torch.equal(a, b)
    assert all(torch.equal(maps_a[key], maps_b[key]) for key in maps_a)


def test_a_default_card_is_written_without_the_new_fields_and_loads_as_dot_product_with_xavier(tmp_path):
    cfg = TransformerConfig.small(vocab_size=30, n_encoder_layers=1, n_decoder_layers=1, d_model=16, d_k=8, d_v=4, d_ff=32)
    save_checkpoint(Transformer(cfg), {"task": "copy", "scale": "sqrt_dk"}, tmp_path / "old")
    card_path = tmp_path / "old.json"
    card = json.loads(card_path.read_text())
    assert "compatibility" not in card["config"] and "init" not in card["config"]  # defaults: written as before them
    model, _ = load_checkpoint(tmp_path / "old")
    assert (model.config.compatibility, model.config.init) == ("dot_product", "xavier")


def test_every_shipped_card_still_loads():
    for card in list_models():
        model, _ = load_model(card["name"], device="cpu")
        assert model.config.compatibility == card["config"].get("compatibility", "dot_product")
