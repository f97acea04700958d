"""The compatibility study's shipped members (attention_viz/data/models/study): one per arm and d_k, seed 0 from
unit_qk, loading through the safe path, their snapshots complete and honest, half precision only where harmless."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attention_viz.data.checkpoints import list_models, load_model, shipped_models_dir
from attention_viz.data.snapshots import LEVELS, list_snapshots, load_snapshots
from attention_viz.data.tasks import make_batch
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.service.catalog import Catalog
from attention_viz.train import study
from attention_viz.train.trainer import TrainSettings

STUDY = shipped_models_dir() / "study"
CARDS = list_models(STUDY)
NAMES = [card["name"] for card in CARDS]

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.integration]  # the shipped study models


def test_one_member_per_arm_and_d_k_is_shipped_with_snapshots():
    expected = {study.shipped_name("reverse", arm, d_k) for arm in study.ARMS for d_k in study.D_K}
    assert set(NAMES) == expected and len(NAMES) == 15
    assert set(list_snapshots(STUDY)) == expected


def test_members_differ_only_in_the_compared_fields_and_match_the_study():
    compared = {"compatibility", "scale", "d_k", "seed", "init"}
    for card in CARDS:
        settings = TrainSettings(**card["settings"])
        assert {k: v for k, v in card["settings"].items() if k not in compared} == {
            k: v for k, v in vars(study.BASE).items() if k not in compared}
        arm = card["study_arm"]
        assert (settings.compatibility, settings.scale) == study.ARMS[arm]
        assert (card["family"], settings.init, settings.seed) == ("study", "unit_qk", 0)
        assert card["name"] == study.shipped_name(card["task"], arm, settings.d_k)
        assert card["curve"]["step"][-1] == card["steps"] == settings.steps


@pytest.mark.parametrize("name", NAMES)
def test_a_member_loads_and_its_snapshots_are_complete(name):
    model, card = load_model(name, device="cpu", directory=STUDY)
    snaps = load_snapshots(name, directory=STUDY)
    steps = snaps.steps
    assert len(steps) >= 20 and steps[0] == 0 and steps[-1] == card["steps"]
    gaps = [math.log(b / a) for a, b in zip(steps[1:], steps[2:]) if a >= 10]
    assert max(gaps) <= 1.6 * float(np.median(gaps))  # log-spaced
    assert 4 <= len(snaps.probes) <= 6
    assert (snaps.meta["compatibility"], snaps.meta["d_k"]) == (card["config"]["compatibility"], card["config"]["d_k"])
    assert len(snaps.meta["train"]["loss"]) == len(snaps.meta["probe"]["exact_match"]) == len(steps)
    assert set(snaps.keys) == {"encoder.0.self_attn", "decoder.0.self_attn", "decoder.0.cross_attn"}
    for key in snaps.keys:
        q = snaps.quantised[key]
        hidden = ~np.broadcast_to(snaps.allowed(key)[None], q.shape)
        assert (q[hidden] == 0).all()  # masked entries exactly 0
        assert np.abs(snaps.maps(key).sum(-1) - 1).max() <= q.shape[-1] / (2 * LEVELS) + 1e-6
    # the stored weights (float16 where the card says so) give the full-precision maps of the last step to 1e-3
    tokenizer = CharTokenizer(max_len=card["max_len"])
    batch = make_batch(snaps.probes, card["task"], tokenizer)
    with torch.no_grad():
        _, maps = model(batch.src, batch.tgt_in, scale=card["scale"])
    worst = max(float(np.abs(maps[key].numpy() - snaps.final[key]).max()) for key in snaps.keys)
    assert worst <= 1e-3, f"{name} ({card['weights_dtype']}): maps differ by {worst:.2e}"
    if card["weights_dtype"] == "float32":
        # float32 to float32: only the kernels' rounding differs (1e-5 for the unscaled d_k = 1024 member, whose
        # logits reach the hundreds, on some CPUs), a tenth of what float16 storage would move at the least
        assert worst <= study.HALF_PRECISION_TOLERANCE / 10 < card["half_precision_max_map_error"]


def test_a_catalog_of_the_study_folder_alone_groups_it_as_the_shipped_families_are():
    families = Catalog(STUDY).families
    assert {key: f.d_ks for key, f in families.items()} == {
        key: list(study.D_K) for key in ("reverse/sqrt_dk", "reverse/none", "reverse/additive")}
    assert families["reverse/additive"].label == "reverse (additive attention)"
    assert not set(NAMES) & {card["name"] for card in list_models()}  # the shipped folder's own list


def test_the_study_is_a_small_part_of_the_budget():
    study_bytes = sum(p.stat().st_size for p in STUDY.iterdir() if p.is_file())
    assets = Path(__file__).resolve().parents[2] / "assets" / "study"
    asset_bytes = sum(p.stat().st_size for p in assets.rglob("*") if p.is_file())
    assert study_bytes + asset_bytes <= 8 * 10**6, (study_bytes, asset_bytes)
