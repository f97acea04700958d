"""The √d_k lab's answer as numbers: bins per mode, samples against the exact law, one logit scale, a cached sweep."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attention_viz import lab
from attention_viz.service import lab_view
from attention_viz.service.lab_view import HISTOGRAM_BINS, HISTOGRAM_RANGE, SWEEP_D_KS, LabData, lab_numbers
from attention_viz.service.limits import LAB_HEADERS, LAB_KEYS_RANGE, LAB_SAMPLES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lab_data():
    return LabData()


@pytest.mark.parametrize("d_k", [1, 64, 4096])
@pytest.mark.parametrize("scaled", [True, False])
def test_histogram_has_its_own_bins_and_agrees_with_the_law(lab_data, d_k, scaled):
    h = lab_data.view(d_k, 32, scaled).data["histogram"]
    sd = 1.0 if scaled else math.sqrt(d_k)
    edges = np.array(h["edges"])
    assert len(edges) == HISTOGRAM_BINS + 1 and len(h["counts"]) == len(h["theory"]) == HISTOGRAM_BINS
    np.testing.assert_allclose(edges[[0, -1]], [-HISTOGRAM_RANGE * sd, HISTOGRAM_RANGE * sd], rtol=1e-7)
    assert h["variable"] == ("q·k / √d_k" if scaled else "q·k") and h["normal_sd"] == pytest.approx(sd)
    assert sum(h["counts"]) + h["below"] + h["above"] == h["samples"] == LAB_SAMPLES
    assert sum(h["theory"]) + h["theory_below"] + h["theory_above"] == pytest.approx(1.0, abs=1e-4)
    # Samples and theory on the same bins: total variation distance (tails included) within sampling noise.
    observed = np.array([h["below"], *h["counts"], h["above"]]) / h["samples"]
    expected = np.array([h["theory_below"], *h["theory"], h["theory_above"]])
    tv = 0.5 * np.abs(observed - expected).sum()
    assert tv == pytest.approx(h["tv_distance"], abs=1e-3)
    assert tv < 0.03 and tv < 2.5 * h["tv_noise"], (tv, h["tv_noise"])
    assert h["variance"] == pytest.approx(sd * sd, rel=0.05) and h["theory_variance"] == pytest.approx(sd * sd)
    # The histogram's peak is inside its axis: not one grey bar beside the curve.
    width = edges[1] - edges[0]
    assert max(h["counts"]) / (h["samples"] * width) == pytest.approx(max(h["theory"]) / width, rel=0.15)


def test_the_test_would_see_a_wrong_theory(lab_data):
    """At d_k = 1 the normal approximation N(0, 1) is far from the samples; the exact law is not."""
    h = lab_data.view(1, 32, True).data["histogram"]
    edges = np.array(h["edges"])
    normal = np.diff(lab.normal_cdf(edges))
    observed = np.array(h["counts"]) / h["samples"]
    assert 0.5 * np.abs(observed - normal).sum() > 0.05 > h["tv_distance"]


@pytest.mark.parametrize("d_k", [1, 16, 4096])
def test_the_logit_scale_is_fixed_across_the_switch_and_scaling_shrinks_the_logits(lab_data, d_k):
    unscaled = lab_data.view(d_k, 64, False).data["query"]
    scaled = lab_data.view(d_k, 64, True).data["query"]
    assert unscaled["limit"] == scaled["limit"] == pytest.approx(max(abs(z) for z in unscaled["logits"]), rel=1e-4)
    np.testing.assert_allclose(scaled["logits"], np.array(unscaled["logits"]) / math.sqrt(d_k), rtol=1e-4, atol=1e-9)
    assert max(map(abs, scaled["logits"])) <= scaled["limit"] / math.sqrt(d_k) * (1 + 1e-4)
    for q in (unscaled, scaled):
        assert q["logits"] == sorted(q["logits"], reverse=True) and q["weights"] == sorted(q["weights"], reverse=True)
        assert sum(q["weights"]) == pytest.approx(1.0, abs=1e-3) and q["max_weight"] == pytest.approx(q["weights"][0],
                                                                                                         rel=1e-3)
        assert q["keys"] == unscaled["keys"]  # the same keys lead in both modes
    logits, _ = lab.query_row(d_k, 64, False, 0, unscaled["index"], unscaled["n_queries"])
    assert unscaled["keys"][0] == int(np.argmax(logits))


@pytest.mark.parametrize("d_k", [1, 64, 512, 4096])
def test_the_query_drawn_is_the_typical_one_the_medians_describe(lab_data, d_k):
    """The one query the lab draws is the sweep's median by its largest unscaled weight, and says which it is."""
    view = lab_data.view(d_k, 32, False)
    q = view.data["query"]
    logits = lab._logits(d_k, q["n_queries"], 32, 0)  # every query of the sweep at this d_k
    largest = np.exp(lab._log_softmax(logits)).max(axis=-1)
    below = int((largest < largest[q["index"]]).sum())
    assert below in ((q["n_queries"] - 1) // 2, q["n_queries"] // 2)  # the middle of the order
    median = next(row for row in view.numbers if row[0].startswith("max softmax weight, median over"))[1]
    assert q["max_weight"] == pytest.approx(median, rel=0.05, abs=0.02)


def test_a_thousand_keys_send_every_weight(lab_data):
    q = lab_data.view(4096, 1024, True).data["query"]
    assert len(q["logits"]) == len(q["weights"]) == 1024 and q["max_entropy"] == pytest.approx(math.log(1024))


def test_the_sweep_is_computed_once_per_number_of_keys():
    data = LabData()
    first = data.view(16, 48, True).data["sweep"]
    for d_k, scaled in [(1, False), (4096, True), (300, False)]:
        assert data.view(d_k, 48, scaled).data["sweep"] is first
    info = data.sweep_cache_info()
    assert (info.misses, info.hits) == (1, 3)
    assert first["d_k"] == SWEEP_D_KS and first["n_keys"] == 48
    assert len(first["scaled"]["grad_norm"]) == len(SWEEP_D_KS)
    assert data.view(16, 49, True).data["sweep"] is not first and data.sweep_cache_info().misses == 2


def test_every_number_of_keys_stays_cached_while_a_class_sits_at_its_own(monkeypatch):
    # a hundred students at a hundred numbers of keys: each sweep is computed once, not again as the others move
    monkeypatch.setattr(LabData, "_sweep_data", lambda self, n_keys: {"n_keys": n_keys})  # the cache, not the numbers
    data = LabData()
    low, high = LAB_KEYS_RANGE
    for n_keys in [*range(low, high + 1), *range(low, high + 1)]:
        data._sweep(n_keys)
    info = data.sweep_cache_info()
    assert (info.misses, info.hits) == (high - low + 1, high - low + 1)


def test_the_shipped_sweeps_cover_every_number_of_keys_and_equal_the_computed_ones():
    from attention_viz.service.lab_view import SWEEP_TABLE, read_sweep_table

    table = read_sweep_table()
    low, high = LAB_KEYS_RANGE
    assert sorted(table) == list(range(low, high + 1)), f"regenerate {SWEEP_TABLE}: python -m devtools.lab_sweeps"
    computing = LabData(table=None)
    rng = np.random.default_rng(7)
    for n_keys in sorted({low, high, 64, *rng.integers(low, high + 1, size=4).tolist()}):
        computed = computing.sweep_data(n_keys)
        for mode in ("unscaled", "scaled"):
            for stat, values in computed[mode].items():  # 4 significant digits: a last bit may round the other way
                np.testing.assert_allclose(table[n_keys][mode][stat], values, rtol=1.001e-3, atol=0, err_msg=(
                    f"{mode} {stat} at {n_keys} keys: the table is stale; python -m devtools.lab_sweeps"))


def test_the_shipped_saturation_equals_the_computed_one():
    """The table's numbers at each of its d_k (the medians the lab's table shows, the query it draws) are the ones
    computed_saturation gives, on a sample of numbers of keys."""
    from attention_viz.service.lab_view import computed_saturation, read_sweep_table

    table = read_sweep_table()
    rng = np.random.default_rng(11)
    for n_keys in sorted({2, 1024, *rng.integers(2, 1025, size=2).tolist()}):
        for i in sorted({0, 12, *rng.integers(0, len(SWEEP_D_KS), size=2).tolist()}):
            shipped, computed = table[n_keys]["saturation"][i], computed_saturation(SWEEP_D_KS[i], n_keys)
            stale = f"at d_k {SWEEP_D_KS[i]}, {n_keys} keys: the table is stale; python -m devtools.lab_sweeps"
            assert shipped["typical"] == computed["typical"], stale
            for mode in ("unscaled", "scaled"):  # as shown (4 decimals, 4 digits): a last bit may round the other way
                np.testing.assert_allclose(shipped[mode], computed[mode], rtol=1.001e-3, atol=1.001e-4, err_msg=stale)


def _query_as_computed(d_k: int, n_keys: int, scaled: bool) -> dict:
    """The lab's query as it was computed before the table held the typical query and one draw served both modes:
    the typical query found, its row drawn once per mode."""
    n_queries = min(256, lab.MAX_SWEEP_LOGITS // n_keys)
    index = lab.typical_query(d_k, n_keys, n_queries, 0)
    unscaled_logits, _ = lab.query_row(d_k, n_keys, False, 0, index, n_queries)
    logits, weights = lab.query_row(d_k, n_keys, scaled, 0, index, n_queries)
    order = np.argsort(-logits, kind="stable")
    return {"index": index, "logits": lab_view.rounded(logits[order]), "weights": lab_view.rounded(weights[order]),
            "keys": order[:lab_view.TOP_KEYS].tolist(), "limit": float(f"{np.abs(unscaled_logits).max():.5g}"),
            "logit_sd": float(f"{logits.std():.4g}"), "max_weight": float(f"{weights.max():.4g}")}


@pytest.mark.parametrize("table", ["shipped", None])
def test_the_query_is_the_one_drawn_for_each_mode_bit_for_bit(table):
    """One draw per d_k and number of keys serves both modes (and the table's typical query where it has one): the
    query sent is, number for number, the one drawn for each mode alone; random d_k (powers of two, and not) and
    numbers of keys."""
    data = LabData() if table else LabData(table=None)
    rng = np.random.default_rng(5)
    cases = [(int(2 ** rng.integers(0, 13)), int(rng.integers(2, 1025))) for _ in range(3)] + [(37, 5), (1000, 300)]
    for d_k, n_keys in cases:
        for scaled in (True, False, True):  # the second time from the kept draw
            sent, expected = data.view(d_k, n_keys, scaled).data["query"], _query_as_computed(d_k, n_keys, scaled)
            assert {key: sent[key] for key in expected} == expected, (d_k, n_keys, scaled)


def test_the_lab_answers_from_the_table_and_computes_what_it_lacks(monkeypatch, tmp_path):
    computed = []

    def refuse(d_ks, *args, **kwargs):
        if len(d_ks) > 1 or d_ks[0] in SWEEP_D_KS:  # the table's sweep, or its medians at one of the sweep's d_k
            raise AssertionError("computed a sweep the table holds")
        computed.append(d_ks[0])
        return original(d_ks, *args, **kwargs)

    original = lab.sweep

    shipped = LabData()
    monkeypatch.setattr(lab, "sweep", refuse)
    for n_keys in (2, 517, 1024):
        sweep = shipped.view(64, n_keys, False).data["sweep"]
        assert (sweep["n_keys"], sweep["d_k"], sweep["max_entropy"]) == (n_keys, SWEEP_D_KS, math.log(n_keys))
        assert len(sweep["scaled"]["grad_norm"]) == len(SWEEP_D_KS)
    assert shipped.view(100, 517, True).numbers == lab_numbers(100, 517) and computed == [100, 100]  # not in the table
    monkeypatch.undo()
    broken = tmp_path / "lab_sweeps.json.gz"
    broken.write_bytes(b"not gzip")
    for table in (tmp_path / "missing.json.gz", broken):  # no table, or a damaged one: every sweep is computed
        computed, kept = LabData(table=table).view(64, 517, False).data["sweep"], shipped.view(64, 517, False).data["sweep"]
        assert computed.keys() == kept.keys() and computed["n_queries"] == kept["n_queries"]
        np.testing.assert_allclose(computed["scaled"]["entropy"], kept["scaled"]["entropy"], rtol=1.001e-3)


def test_the_answer_is_json_and_the_numbers_match_the_table(lab_data):
    view = lab_data.view(256, 64, False)
    assert json.loads(json.dumps(view.data, allow_nan=False)) == view.data
    assert (view.data["d_k"], view.data["n_keys"], view.data["scaled"]) == (256, 64, False)
    assert all(len(row) == len(LAB_HEADERS) for row in view.numbers)
    assert view.numbers[0][3] == "256 and 1" and view.numbers == lab_numbers(256, 64)
    assert view.numbers[0][1] == pytest.approx(256, rel=0.05) and view.numbers[0][2] == pytest.approx(1, rel=0.05)


@pytest.mark.parametrize("args, message", [
    ((0, 32, True), "d_k must be between 1 and 4096"), ((math.nan, 32, True), "d_k must be a finite number"),
    ((16, 1, True), "number of keys must be between 2 and 1024"), ((16, 32, "perhaps"), "scaled must be true or false"),
    ((2.5, 32, True), "d_k must be a whole number"),
])
def test_bad_inputs_are_refused_with_a_message(lab_data, args, message):
    with pytest.raises(ValueError, match=message):
        lab_data.view(*args)


def test_no_matplotlib_and_no_gradio_in_the_request_path():
    code = ("import sys; from attention_viz.service.lab_view import LabData; LabData().view(64, 1024, False); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'gradio', 'PIL')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
