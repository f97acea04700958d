"""The shipped models (package data): they load through the safe path, their cards tell the truth, they work."""

import random
from pathlib import Path

import pytest
import torch

from attention_viz.data.checkpoints import count_parameters, list_models, load_model, shipped_models_dir
from attention_viz.train.family import FAMILY_TASK, family_cards, member_name, summarize
from attention_viz.draw.figures import family_figure
from attention_viz.core.model import Transformer
from attention_viz.data.tasks import TASKS, alignment, heldout_strings, make_batch, sample_strings, sample_texts, target
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.train.trainer import TrainSettings, exact_match

ASSETS = Path(__file__).resolve().parents[2] / "assets"
CARDS = list_models()
FRESH_SEED = 20240601  # neither the held-out seed nor any training seed


pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.integration]  # one torch thread; the shipped models


def test_one_scaled_model_per_task_and_a_dk_family_are_shipped():
    names = {card["name"] for card in CARDS}
    assert set(TASKS) <= names
    family = family_cards()
    d_ks = sorted({d_k for d_k, _ in family})
    assert len(d_ks) >= 4 and d_ks[-1] / d_ks[0] >= 32
    assert set(family) == {(d_k, scale) for d_k in d_ks for scale in ("sqrt_dk", "none")}
    assert all(member_name(d_k, scale) in names for d_k, scale in family)


@pytest.mark.parametrize("name", [card["name"] for card in CARDS])
def test_checkpoint_loads_safely_and_matches_its_card(name):
    model, card = load_model(name, device="cpu")
    assert model.config.to_dict() == card["config"]
    # cards written before §3.2.1's options existed lack them: they were Xavier-initialised scaled/plain dot products
    assert (model.config.compatibility, model.config.init) == (
        card["config"].get("compatibility", "dot_product"), card["config"].get("init", "xavier"))
    assert card["n_params"] == count_parameters(model)
    settings = TrainSettings(**card["settings"])
    assert settings.model_config() == model.config
    assert (card["task"], card["scale"], card["steps"], card["max_len"]) == (
        settings.task, settings.scale, settings.steps, settings.max_len)
    assert len(card["curve"]["step"]) == len(card["curve"]["loss"]) == len(card["curve"]["exact_match"])
    assert card["curve"]["step"][-1] == card["steps"]
    assert card["wall_time_s"] > 0 and card["heldout_size"] == 1000


def test_family_members_differ_only_in_d_k_and_scaling():
    family = family_cards()
    varying = {"d_k", "scale"}
    reference = {k: v for k, v in next(iter(family.values()))["settings"].items() if k not in varying}
    for (d_k, scale), card in family.items():
        assert card["task"] == FAMILY_TASK and card["config"]["d_k"] == d_k and card["scale"] == scale
        assert {k: v for k, v in card["settings"].items() if k not in varying} == reference


@pytest.mark.parametrize("task", TASKS)
def test_scaled_task_model_is_exact_on_fresh_strings(task):
    model, card = load_model(task, device="cpu")
    assert card["task"] == task and card["scale"] == "sqrt_dk"
    assert card["heldout_exact_match"] >= 0.99
    texts = sample_texts(task, 200, card["max_len"], random.Random(FRESH_SEED))
    assert exact_match(model, texts, task, CharTokenizer(card["max_len"]), card["scale"]) >= 0.99


def test_assets_fit_the_budget():
    """assets/ and the shipped models (package data) together stay within 25 MiB."""
    folders = [ASSETS, shipped_models_dir()]
    total = sum(path.stat().st_size for folder in folders for path in folder.rglob("*") if path.is_file())
    assert total <= 25 * 2**20, f"assets/ and the shipped models hold {total / 2**20:.1f} MiB"
    assert (ASSETS / "dk_family.png").stat().st_size > 10_000


def test_family_summary_and_figure_cover_every_member():
    family = family_cards()
    rows = summarize(family)
    assert [(r["d_k"], r["scale"]) for r in rows] == list(family)
    assert all(0.0 <= r["final_loss"] < r["quarter_loss"] for r in rows)
    fig = family_figure(family)
    assert len(fig.axes) == 2 * len({d_k for d_k, _ in family})
    assert all(len(ax.lines) == 2 for ax in fig.axes)  # scaled and unscaled in every panel


def cross_attention_alignment(model: Transformer, task: str, texts: list[str]) -> float:
    """How often the last decoder layer's cross-attention (heads averaged) peaks on the source character written."""
    tokenizer = CharTokenizer(max(len(t) for t in texts))
    batch = make_batch(texts, task, tokenizer)
    with torch.no_grad():
        _, maps = model(batch.src, batch.tgt_in)
    weights = maps[f"decoder.{model.config.n_decoder_layers - 1}.cross_attn"].mean(1)  # (B, T, S)
    peaks = weights.argmax(-1)  # (B, T)
    hits = total = 0
    for row, text in enumerate(texts):
        for position, char in enumerate(target(task, text)):
            source = peaks[row, position].item()
            aligned = source == position if task == "copy" else source == len(text) - 1 - position
            hits += (source < len(text) and text[source] == char) if task == "sort" else aligned
            total += 1
    return hits / total


@pytest.mark.parametrize("task", ["copy", "reverse", "sort"])
def test_cross_attention_shows_a_diagonal_an_anti_diagonal_and_a_permutation(task):
    texts = sample_strings(100, 20, random.Random(FRESH_SEED + 1))
    model, _ = load_model(task, device="cpu")
    torch.manual_seed(0)
    untrained = Transformer(model.config).eval()
    assert cross_attention_alignment(model, task, texts) >= 0.85
    assert cross_attention_alignment(untrained, task, texts) < 0.5


def test_the_dates_model_reaches_its_held_out_score():
    model, card = load_model("dates", device="cpu")
    assert (card["max_len"], card["alphabet"]) == (32, "abcdefghijklmnopqrstuvwxyz 0123456789")
    assert card["heldout_exact_match"] >= 0.99 and card["heldout_seed"] == 1_000_003
    texts = heldout_strings(card["max_len"], 50, task="dates")
    assert texts[0] == "sixteenth of february 2085"  # the dates the card was scored on
    assert exact_match(model, texts, "dates", CharTokenizer(card["max_len"]), card["scale"]) == 1.0


def dates_alignment(model: Transformer, texts: list[str]) -> float:
    """How often the last decoder layer's cross-attention (heads averaged) peaks inside tasks.alignment's row (the
    year digit, the month's word, the day's words) while writing a digit."""
    batch = make_batch(texts, "dates", CharTokenizer(32))
    with torch.no_grad():
        _, maps = model(batch.src, batch.tgt_in)
    peaks = maps[f"decoder.{model.config.n_decoder_layers - 1}.cross_attn"].mean(1).argmax(-1)  # (B, T)
    hits = [peaks[b, t].item() in row for b, text in enumerate(texts)
            for t, row in enumerate(alignment("dates", text)) if row]
    return sum(hits) / len(hits)


def test_dates_cross_attention_jumps_to_the_words_it_writes_from():
    texts = sample_texts("dates", 100, 32, random.Random(FRESH_SEED + 1))
    model, _ = load_model("dates", device="cpu")
    torch.manual_seed(0)
    assert dates_alignment(model, texts) >= 0.75
    assert dates_alignment(Transformer(model.config).eval(), texts) < 0.5
