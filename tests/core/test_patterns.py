"""Pattern scores (core.patterns, attention_viz.pattern_scores) on hand-built heads against the definitions written
here with loops: a head that does a pattern scores 1, an evenly spread head scores chance, the induction targets on a
repeated random sequence are i − n + 1, and a model's own scores come from that sequence."""

import numpy as np
import pytest
import torch

from attention_viz import PatternScores, TextMaps, Transformer, TransformerConfig, pattern_scores
from attention_viz.core.patterns import (
    duplicate_targets,
    induction_targets,
    pattern_scores_of_maps,
    previous_targets,
    score,
)


def loop_duplicate(tokens):
    return np.array([[j < i and tokens[j] == tokens[i] for j in range(len(tokens))] for i in range(len(tokens))])


def loop_induction(tokens):
    n = len(tokens)
    return np.array([[any(j + 1 == k and j < i and tokens[j] == tokens[i] for j in range(n)) for k in range(n)]
                     for i in range(n)])


def loop_score(weights, targets, allowed):
    """The mean over counted rows of the weight on the row's targets; a row counts when it has a target it may see and
    may see some other key too."""
    values = []
    for i in range(weights.shape[0]):
        seen = [j for j in range(weights.shape[1]) if allowed[i, j]]
        hit = [j for j in seen if targets[i, j]]
        if hit and len(hit) < len(seen):
            values.append(sum(weights[i, j] for j in hit))
    return np.mean(values) if values else np.nan


def rows_on(targets):
    """A head putting all its weight, evenly, on each row's targets (rows without one look at key 0)."""
    w = targets.astype(float)
    w[~targets.any(-1), 0] = 1.0
    return w / w.sum(-1, keepdims=True)


@pytest.mark.parametrize("tokens", [list("abcabdab"), [5, 5, 5, 2], list("xyzxyz"), list("a")])
def test_duplicate_and_induction_targets_are_the_definitions(tokens):
    assert (duplicate_targets(tokens) == loop_duplicate(tokens)).all()
    assert (induction_targets(tokens) == loop_induction(tokens)).all()


def test_on_a_repeated_random_sequence_induction_looks_at_i_minus_n_plus_1():
    n, r = 6, [17, 3, 44, 9, 28, 11]
    for prefix in ([], ["<bos>"]):
        tokens = prefix + r + r
        grid = induction_targets(tokens)
        start = len(prefix)
        expected = np.zeros_like(grid)
        for i in range(start + n, start + 2 * n):
            expected[i, i - n + 1] = True
        assert (grid == expected).all()


def test_heads_that_do_a_pattern_score_one_and_even_heads_score_chance():
    tokens = list("<abcab") + list("cabc")  # repeats: duplicates and inductions exist
    n = len(tokens)
    causal = np.tril(np.ones((n, n), dtype=bool))
    grids = {"previous": previous_targets(n, n), "duplicate": duplicate_targets(tokens),
             "induction": induction_targets(tokens)}
    for name, grid in grids.items():
        head = rows_on(grid & causal)
        value, chance = score(head, grid, causal)
        assert value == pytest.approx(1.0)
        even = causal / causal.sum(-1, keepdims=True)
        assert score(even, grid, causal)[0] == pytest.approx(chance)
        assert chance == pytest.approx(loop_score(even, grid, causal))


def test_scores_of_maps_equal_the_loop_definition_for_every_head():
    rng = np.random.default_rng(0)
    tokens = list("thequickthequick")
    n = len(tokens)
    causal = np.tril(np.ones((n, n), dtype=bool))
    raw = rng.random((2, 3, n, n)) * causal  # (L, H, T, T), causal
    maps = {f"decoder.{l}.self_attn": (raw[l] / raw[l].sum(-1, keepdims=True))[None] for l in range(2)}
    got = pattern_scores_of_maps(maps, target=tokens)
    first = np.zeros((n, n), dtype=bool)
    first[:, 0] = True
    definitions = {"previous": np.eye(n, k=-1, dtype=bool), "first": first, "duplicate": loop_duplicate(tokens),
                   "induction": loop_induction(tokens)}
    for name, grid in definitions.items():
        for l in range(2):
            for h in range(3):
                expected = loop_score(maps[f"decoder.{l}.self_attn"][0, h], grid, causal)
                assert got.scores["decoder.self_attn"][name][l, h] == pytest.approx(expected, abs=1e-6), (name, l, h)


def test_several_patterns_scored_at_once_are_each_scored_alone_to_the_bit():
    """score with targets [P, Q, K] (the app scores a kind's patterns at once) gives, pattern by pattern, what score
    gives each alone, bit for bit, NaN where no row counts included; random shapes, masks and weights."""
    rng = np.random.default_rng(1)
    for case in range(20):
        n_q, n_k = rng.integers(1, 9, size=2)
        allowed = rng.random((n_q, n_k)) < 0.8
        weights = rng.random((int(rng.integers(1, 4)), int(rng.integers(1, 5)), n_q, n_k)).astype(
            np.float32 if case % 2 else np.float64) * allowed  # (L, H, Q, K)
        weights /= np.maximum(weights.sum(-1, keepdims=True), 1e-9)
        targets = rng.random((int(rng.integers(1, 6)), n_q, n_k)) < 0.3  # (P, Q, K)
        together, chances = score(weights, targets, allowed)
        assert together.shape == (len(targets), *weights.shape[:2]) and chances.shape == (len(targets),)
        for grid, values, chance in zip(targets, together, chances):
            alone, alone_chance = score(weights, grid, allowed)
            np.testing.assert_array_equal(values, alone)
            assert chance == alone_chance or np.isnan(chance) and np.isnan(alone_chance), case


def test_encoder_decoder_attention_gets_the_first_token_only_and_tokens_must_fit():
    maps = {"decoder.0.cross_attn": np.full((1, 2, 3, 4), 0.25)}
    got = pattern_scores_of_maps(maps, source=list("abcd"), target=list("xyz"))
    assert list(got.scores["decoder.cross_attn"]) == ["first"]
    assert got.scores["decoder.cross_attn"]["first"] == pytest.approx(np.full((1, 2), 0.25))
    with pytest.raises(ValueError, match="3 queries and 4 keys, but 2 and 4 tokens"):
        pattern_scores_of_maps(maps, source=list("abcd"), target=list("xy"))


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(TransformerConfig.small(vocab_size=40, n_encoder_layers=2, n_decoder_layers=2, d_model=16,
                                               n_heads=2, d_k=4, d_v=4, d_ff=16, dropout=0.0)).eval()


def test_a_models_scores_come_from_a_seeded_repeated_random_sequence(model):
    got = pattern_scores(model, n=8, seed=3)
    assert isinstance(got, PatternScores) and got.repeated == 8
    assert set(got.scores) == {"encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"}
    source, _ = got.tokens["encoder.self_attn"]
    assert len(source) == 17 and source[:8] == source[8:16] and source[-1] == "<eos>" and len(set(source[:8])) == 8
    assert got.tokens["decoder.self_attn"][0][0] == "<bos>"
    for kind, values in got.scores.items():
        for name, value in values.items():
            assert value.shape == (2, 2) and np.isfinite(value).all() and (0 <= value).all() and (value <= 1).all()
    again = pattern_scores(model, n=8, seed=3)
    assert all(np.array_equal(got.scores[k][p], again.scores[k][p]) for k in got.scores for p in got.scores[k])
    other = pattern_scores(model, n=8, seed=4)
    assert other.tokens != got.tokens
    # the model's scores are its maps' scores on the same sequence
    src = [4 + "".join(chr(c) for c in range(32, 127)).index(t) for t in source[:-1]] + [2]
    with torch.no_grad():
        _, maps = model(torch.tensor([src]), torch.tensor([[1] + src[:-1]]))
    direct = pattern_scores_of_maps(maps, src, [1] + src[:-1])
    np.testing.assert_allclose(direct.scores["decoder.self_attn"]["induction"],
                               got.scores["decoder.self_attn"]["induction"])
    assert got.best("induction")[0] in got.scores and "induction" in got.table() and len(got.rows()) == 12


def test_text_maps_bring_their_tokens_and_bad_requests_are_refused(model):
    maps = {"encoder.0.self_attn": np.full((1, 2, 3, 3), 1 / 3)}
    got = pattern_scores(TextMaps(maps, list("aba")))
    assert got.scores["encoder.self_attn"]["duplicate"] == pytest.approx(np.full((1, 2), 1 / 3))
    with pytest.raises(ValueError, match="distinct tokens asked of a vocabulary of 36"):
        pattern_scores(model, n=37)
    with pytest.raises(ValueError, match="must be an integer"):
        pattern_scores(model, n=1)
    with pytest.raises(ValueError, match="takes a model, or maps"):
        pattern_scores("not a model")
    with pytest.raises(ValueError, match="maps.select"):
        pattern_scores({"encoder.0.self_attn": np.full((2, 1, 3, 3), 1 / 3)}, list("abc"))
