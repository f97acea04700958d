"""The snapshot files: a round trip keeps every value, quantisation keeps 0 at 0 and rows near 1, bad files are refused."""

import json

import numpy as np
import pytest

from attention_viz.data.snapshots import (
    FINAL_PREFIX,
    LEVELS,
    dequantise,
    list_snapshots,
    load_snapshots,
    quantise,
    save_snapshots,
    snapshot_paths,
)


def softmax_rows(rng, shape, allowed):
    """Random attention rows [..., Q, K] that are exactly 0 where `allowed` is False."""
    logits = rng.normal(scale=3.0, size=shape)
    e = np.where(allowed, np.exp(logits - logits.max(-1, keepdims=True)), 0.0)
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def example(n_steps=4, lengths=(5, 3), heads=2):
    """Maps of two probes of different lengths, padded to the longest, with masks as the model applies them."""
    rng = np.random.default_rng(0)
    width = max(lengths)
    key_ok = np.array([[j < n for j in range(width)] for n in lengths])[:, None, None, :]  # (P, 1, 1, K)
    causal = np.tril(np.ones((width, width), dtype=bool))
    shapes = {"encoder.0.self_attn": key_ok, "decoder.0.self_attn": key_ok & causal, "decoder.0.cross_attn": key_ok}
    maps = {k: np.stack([softmax_rows(rng, (len(lengths), heads, width, width), np.broadcast_to(a, (len(lengths), heads, width, width)))
                         for _ in range(n_steps)]) for k, a in shapes.items()}
    meta = {"steps": [0, 1, 10, 100][:n_steps], "probes": ["abcd", "ab"],
            "src_tokens": [list("abcd") + ["<eos>"], list("ab") + ["<eos>"]],
            "tgt_tokens": [["<bos>"] + list("dcba"), ["<bos>"] + list("ba")],
            "train": {"loss": [None, 3.0, 2.0, 1.0][:n_steps]}, "probe": {"loss": [4.0, 3.5, 2.5, 0.5][:n_steps]}}
    return meta, maps, shapes


def test_quantisation_keeps_zero_and_one_and_errs_by_half_a_level():
    w = np.array([0.0, 1.0, 0.5, 1e-9, 0.999, 0.1234])
    q = quantise(w)
    assert q.dtype == np.uint8 and q[0] == 0 and q[1] == LEVELS and q[3] == 0
    assert np.abs(dequantise(q) - w).max() <= 0.5 / LEVELS + 1e-7


def test_a_round_trip_keeps_every_value_and_the_masks(tmp_path):
    meta, maps, allowed = example()
    quantised = {k: quantise(v) for k, v in maps.items()}
    final = {k: v[-1] for k, v in maps.items()}
    save_snapshots(tmp_path / "m", {**meta, "model": "m"}, quantised, final)
    snaps = load_snapshots(tmp_path / "m")
    assert snaps.steps == meta["steps"] and snaps.probes == meta["probes"] and snaps.keys == list(maps)
    assert snaps.meta["train"]["loss"][0] is None and snaps.meta["model"] == "m"
    for key in maps:
        assert np.array_equal(snaps.quantised[key], quantised[key])
        assert np.array_equal(snaps.final[key], final[key]) and snaps.final[key].dtype == np.float32
        weights = snaps.maps(key)
        assert np.abs(weights - maps[key]).max() <= 0.5 / LEVELS + 1e-7
        assert np.array_equal(snaps.allowed(key), allowed[key])  # the masks, from the token lists
        hidden = ~np.broadcast_to(allowed[key][None], weights.shape)
        assert (snaps.quantised[key][hidden] == 0).all()  # masked: exactly 0
        width = weights.shape[-1]
        assert np.abs(weights.sum(-1) - 1).max() <= width / (2 * LEVELS) + 1e-6
    one = snaps.map_at("decoder.0.cross_attn", 2, 1)  # probe "ab": 3 target rows, 3 source keys
    assert one.shape == (2, 3, 3)
    assert np.array_equal(one, dequantise(quantised["decoder.0.cross_attn"][2, 1, :, :3, :3]))
    assert snaps.map_at("encoder.0.self_attn", 0, 0).shape == (2, 5, 5)
    # the same files by the JSON's path, and by name in a folder
    assert load_snapshots(snapshot_paths(tmp_path / "m")[0]).steps == meta["steps"]
    assert load_snapshots("m", directory=tmp_path).probes == meta["probes"]
    assert list_snapshots(tmp_path) == ["m"]


def test_files_that_disagree_or_are_missing_are_refused(tmp_path):
    meta, maps, _ = example()
    quantised = {k: quantise(v) for k, v in maps.items()}
    final = {k: v[-1] for k, v in maps.items()}
    with pytest.raises(ValueError, match="steps"):
        save_snapshots(tmp_path / "a", {**meta, "steps": [0, 1, 10]}, quantised, final)
    with pytest.raises(ValueError, match="float32"):
        save_snapshots(tmp_path / "a", meta, quantised, {k: v[:1] for k, v in final.items()})
    with pytest.raises(FileNotFoundError):
        load_snapshots(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError):
        load_snapshots("nothing", directory=tmp_path)
    # a JSON that no longer matches its arrays
    save_snapshots(tmp_path / "b", meta, quantised, final)
    json_path, npz_path = snapshot_paths(tmp_path / "b")
    bad = json.loads(json_path.read_text())
    bad["probes"] = bad["probes"][:1]
    json_path.write_text(json.dumps(bad))
    with pytest.raises(ValueError):
        load_snapshots(tmp_path / "b")
    # arrays that need pickle are never unpickled
    np.savez(npz_path, **{key: np.array([object()], dtype=object) for key in [*maps, *(FINAL_PREFIX + k for k in maps)]})
    json_path.write_text(json.dumps({**bad, "probes": meta["probes"]}))
    with pytest.raises(ValueError, match="pickle"):
        load_snapshots(tmp_path / "b")
