"""Training, step by step: the study's snapshots packed for the page, against the snapshot files themselves."""

import base64

import numpy as np
import pytest

from attention_viz.core.maps import weight_on
from attention_viz.data.tasks import alignment
from attention_viz.service.catalog import Catalog
from attention_viz.service.training_view import FORMAT, trained_sizes, training_data


@pytest.fixture(scope="module")
def catalog():
    return Catalog()


def test_every_trained_size_packs_the_three_arms_from_their_snapshots(catalog):
    sizes = trained_sizes(catalog)
    assert sizes == [8, 32, 128, 512, 1024]
    for d_k in sizes:
        data = training_data(catalog, str(d_k))
        assert data["format"] == FORMAT and data["d_k"] == d_k and data["d_ks"] == sizes
        assert [arm["arm"] for arm in data["arms"]] == ["scaled_dot", "dot", "additive"]
        assert data["kinds"][0]["kind"] == "decoder.cross_attn"  # the telling one first
        n_steps, n_probes = len(data["steps"]), len(data["probes"])
        assert n_steps == 24 and n_probes == 5 and data["steps"][0] == 0
        for arm in data["arms"]:
            snaps = catalog.snapshots(arm["model"])
            assert catalog.cards[arm["model"]]["config"]["d_k"] == d_k
            for key, b64 in arm["maps"].items():
                got = np.frombuffer(base64.b64decode(b64), np.uint8).reshape(arm["shape"][key])
                np.testing.assert_array_equal(got, snaps.quantised[key])
            for part in ("train", "probe"):
                assert all(len(values) == n_steps for values in arm[part].values())
            assert len(arm["alignment"]) == n_steps and all(0 <= a <= 1 for a in arm["alignment"])


def test_alignment_is_the_weight_on_reverses_anti_diagonal(catalog):
    """The last step's alignment, recomputed from the full-precision final maps, within the uint8 quantisation."""
    data = training_data(catalog, 512)
    for arm in data["arms"]:
        snaps = catalog.snapshots(arm["model"])
        scores = []
        for p, text in enumerate(snaps.probes):
            n_q, n_k = snaps.lengths("decoder.0.cross_attn", p)
            weights = snaps.final["decoder.0.cross_attn"][p][:, :n_q, :n_k]
            targets = np.zeros((n_q, n_k), bool)
            for t, positions in enumerate(alignment("reverse", text)):
                targets[t, list(positions)] = True
            scores.append(weight_on(weights, targets).mean())
        assert arm["alignment"][-1] == pytest.approx(np.mean(scores), abs=0.01)
    by_arm = {arm["arm"]: arm["alignment"][-1] for arm in data["arms"]}
    assert by_arm["dot"] < 0.5 < min(by_arm["scaled_dot"], by_arm["additive"])  # the study's finding at d_k 512


@pytest.mark.parametrize("bad", ["7", "", "512.0", None, True, 3.5, "x" * 10_000, [512]])
def test_only_trained_sizes_are_accepted(catalog, bad):
    with pytest.raises(ValueError) as error:
        training_data(catalog, bad)
    assert str(error.value) == "d_k must be one of the trained sizes 8, 32, 128, 512, 1024."


def test_no_snapshots_no_view(tmp_path):
    empty = Catalog(tmp_path)
    assert trained_sizes(empty) == []
    with pytest.raises(ValueError, match="No training snapshots ship"):
        training_data(empty, 8)
