"""Snapshots during training: log-spaced steps, maps whose rows sum to 1 and whose masked entries are exactly 0,
a round trip through the files, and training that is the same with the recorder as without it."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from attention_viz.data.snapshots import LEVELS, load_snapshots
from attention_viz.data.tasks import heldout_strings
from attention_viz.train.snapshots import SnapshotRecorder, log_steps, probe_texts
from attention_viz.train.trainer import TrainSettings, train

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = TrainSettings(task="reverse", d_model=16, n_heads=2, n_layers=1, d_ff=16, d_k=8, d_v=8, max_len=6,
                     batch_size=8, steps=40, warmup=2, log_every=5, heldout_size=10, init="unit_qk")


@pytest.mark.parametrize("last", [100, 1000, 1500, 100_000])
def test_log_steps_are_at_least_20_log_spaced_from_zero_to_the_last(last):
    steps = log_steps(last)
    assert len(steps) >= 20 and steps[0] == 0 and steps[-1] == last
    assert steps == sorted(set(steps))
    pairs = list(zip(steps[1:], steps[2:]))
    gaps = [math.log(b / a) for a, b in pairs if a >= 10]  # above 10, rounding to integers hardly matters
    typical = float(np.median(gaps))
    assert all(0.6 * typical <= gap <= 1.6 * typical for gap in gaps), (steps, gaps)
    assert math.log(last) / typical == pytest.approx(len(steps) - 2, rel=0.35)  # one grid from 1 to last
    assert steps[1] == 1  # the first update is seen


def test_short_runs_get_a_snapshot_at_every_step():
    assert log_steps(10) == list(range(11)) and log_steps(23) == list(range(24))


def test_probes_are_held_out_strings_of_decreasing_length():
    texts = probe_texts(8)
    assert 4 <= len(texts) <= 6 and [len(t) for t in texts] == sorted((len(t) for t in texts), reverse=True)
    assert len(texts[0]) == 8 and set(texts) <= set(heldout_strings(8))


def test_a_recorded_run_trains_the_same_and_its_snapshots_round_trip(tmp_path):
    steps, texts = log_steps(TINY.steps), probe_texts(TINY.max_len)
    recorder = SnapshotRecorder(TINY, steps, texts)
    model, card = train(TINY, device="cpu", progress=False, observe=recorder)
    plain, plain_card = train(TINY, device="cpu", progress=False)
    assert card["curve"] == plain_card["curve"]  # recording changes nothing in training
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), plain.state_dict().values()))
    recorder.save(tmp_path / "tiny", model="tiny")
    snaps = load_snapshots(tmp_path / "tiny")
    assert snaps.steps == steps and snaps.probes == texts and len(snaps.steps) >= 20
    assert set(snaps.keys) == {"encoder.0.self_attn", "decoder.0.self_attn", "decoder.0.cross_attn"}
    assert snaps.meta["train"]["loss"][0] is None and all(v is not None for v in snaps.meta["train"]["loss"][1:])
    assert snaps.meta["train"]["loss"][-1] == pytest.approx(card["curve"]["loss"][-1], abs=2.0)
    assert len(snaps.meta["probe"]["exact_match"]) == len(steps)
    assert (snaps.meta["compatibility"], snaps.meta["d_k"], snaps.meta["scale"]) == ("dot_product", 8, "sqrt_dk")
    with torch.no_grad():
        _, maps = model.eval()(recorder.batch.src, recorder.batch.tgt_in, scale=TINY.scale)
    for key in snaps.keys:
        allowed = snaps.allowed(key)
        q = snaps.quantised[key]  # (steps, P, H, Q, K)
        assert q.shape[2] == TINY.n_heads
        hidden = ~np.broadcast_to(allowed[None], q.shape)
        assert (q[hidden] == 0).all()  # masked entries exactly 0, at every step
        assert (q[~hidden] > 0).any()
        rows = snaps.maps(key).sum(-1)  # every row attends to at least one key (<bos> or the first character)
        assert np.abs(rows - 1).max() <= q.shape[-1] / (2 * LEVELS) + 1e-6
        np.testing.assert_array_equal(snaps.final[key], maps[key].numpy())  # the last step, full precision
        assert np.abs(snaps.maps(key)[-1] - snaps.final[key]).max() <= 0.5 / LEVELS + 1e-7
    first, last = snaps.map_at("decoder.0.cross_attn", 0, 0), snaps.map_at("decoder.0.cross_attn", -1, 0)
    assert first.shape == last.shape == (TINY.n_heads, len(texts[0]) + 1, len(texts[0]) + 1)


def test_a_recorder_that_missed_steps_refuses_to_save(tmp_path):
    recorder = SnapshotRecorder(replace(TINY, steps=5), log_steps(5), probe_texts(TINY.max_len))
    with pytest.raises(RuntimeError, match="missing"):
        recorder.save(tmp_path / "x")
