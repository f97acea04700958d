"""Training: a tiny model's loss falls, runs are reproducible, the command line writes a loadable checkpoint + card."""

import json

import pytest
import torch

from attention_viz.data.checkpoints import load_checkpoint
from attention_viz.train.trainer import TrainSettings, accuracies, learning_rate, main, train

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: one torch thread, fastest for tiny models


TINY = dict(
    task="copy", d_model=32, d_k=8, d_v=8, n_heads=2, n_layers=1, d_ff=64, max_len=6,
    batch_size=32, lr=3e-3, warmup=5, heldout_size=100,
)


def test_a_few_dozen_steps_lower_the_loss():
    _, card = train(TrainSettings(**TINY, steps=48, log_every=8), device="cpu", progress=False)
    losses = card["curve"]["loss"]
    assert card["curve"]["step"] == [8, 16, 24, 32, 40, 48]
    assert losses[-1] < 0.7 * losses[0], losses
    assert card["curve"]["token_acc"][-1] > card["curve"]["token_acc"][0]


def test_same_seed_same_weights_other_seed_other_weights():
    settings = TrainSettings(**TINY, steps=3, seed=5)
    a, _ = train(settings, device="cpu", progress=False)
    b, _ = train(settings, device="cpu", progress=False)
    c, _ = train(TrainSettings(**TINY, steps=3, seed=6), device="cpu", progress=False)
    for (name, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb), name
    assert not all(torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters()))


def test_schedule_warms_up_then_decays_to_a_tenth():
    s = TrainSettings(steps=1000, warmup=100, lr=1e-3)
    assert learning_rate(0, s) == pytest.approx(1e-5)
    assert learning_rate(99, s) == pytest.approx(1e-3)
    assert learning_rate(550, s) < learning_rate(200, s) < 1e-3
    assert learning_rate(1000, s) == pytest.approx(1e-4)


def test_accuracies_ignore_padding():
    tgt = torch.tensor([[5, 6, 2, 0], [7, 2, 0, 0]])
    logits = torch.nn.functional.one_hot(torch.tensor([[5, 6, 2, 9], [7, 9, 9, 9]]), 10).float()
    assert accuracies(logits, tgt, pad_id=0) == (pytest.approx(4 / 5), 0.5)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="unknown task"):
        TrainSettings(task="rot13")
    with pytest.raises(ValueError, match="scale"):
        TrainSettings(scale="off")  # the command line's "off" alias is translated before this point


def test_command_line_writes_a_checkpoint_and_card(tmp_path, capsys):
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items() if k != "task"]
    main(["--task", "reverse", "--scale", "off", "--steps", "4", "--log-every", "2", "--quiet",
          "--device", "cpu", "--threads", "1", "--out", str(tmp_path / "rev"), *flags])
    assert "held-out exact match" in capsys.readouterr().out
    card = json.loads((tmp_path / "rev.json").read_text())
    assert (card["task"], card["scale"], card["steps"], card["max_len"]) == ("reverse", "none", 4, 6)
    assert card["heldout_size"] == 100 and 0.0 <= card["heldout_exact_match"] <= 1.0
    assert card["curve"]["step"] == [2, 4] and len(card["curve"]["loss"]) == 2
    assert "--scale none" in card["command"] and "--d-k 8" in card["command"]
    model, loaded = load_checkpoint(tmp_path / "rev")
    assert model.config.d_k == 8 and loaded == card


def test_max_len_defaults_to_the_tasks_own():
    assert TrainSettings().max_len == 20 and TrainSettings(task="sort").max_len == 20
    assert TrainSettings(task="dates").max_len == 32 and TrainSettings(task="dates", max_len=40).max_len == 40
    assert TrainSettings(task="copy", max_len=6).max_len == 6
    with pytest.raises(ValueError, match="dates run to 32 characters"):
        TrainSettings(task="dates", max_len=20)


def test_a_dates_run_records_its_alphabet_and_max_len(tmp_path):
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items() if k not in ("task", "max_len")]
    main(["--task", "dates", "--steps", "2", "--log-every", "1", "--quiet", "--device", "cpu", "--threads", "1",
          "--out", str(tmp_path / "dates"), *flags])
    card = json.loads((tmp_path / "dates.json").read_text())
    assert (card["task"], card["max_len"], card["settings"]["max_len"]) == ("dates", 32, 32)
    assert card["alphabet"] == "abcdefghijklmnopqrstuvwxyz 0123456789"
    assert "--max-len 32" in card["command"]
