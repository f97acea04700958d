"""Comparisons (core.alignment, attention_viz.compare): tokens aligned by identity and order, the difference a − b on
the cells whose query and key both align and NaN on the rest, written here cell by cell."""

import numpy as np
import pytest
import torch

from attention_viz import Comparison, TextMaps, Transformer, TransformerConfig, compare, maps_of
from attention_viz.core.alignment import align, aligned_difference

A = ["The", " keys", " to", " the", " cabinet", " are"]
B = ["The", " key", " to", " the", " cabinets", " is"]


def test_a_minimal_pair_aligns_its_shared_words_and_names_the_rest():
    alignment = align(A, B)
    assert alignment.pairs == [(0, 0), (2, 2), (3, 3)]
    assert alignment.a_only == [1, 4, 5] and alignment.b_only == [1, 4, 5]
    shifted = align(["a", "b", "c"], ["x", "a", "b", "c"])  # one token more in front: pairs by identity, not index
    assert shifted.pairs == [(0, 1), (1, 2), (2, 3)] and shifted.b_only == [0]
    assert align(list("abc"), list("abc")).pairs == [(0, 0), (1, 1), (2, 2)]


def test_the_difference_is_a_minus_b_on_aligned_cells_and_nan_elsewhere():
    rng = np.random.default_rng(0)
    qa, ka, qb, kb = list("xab"), list("abcd"), list("ab"), list("zabd")
    a, b = rng.random((2, 3, 3, 4)), rng.random((2, 3, 2, 4))  # (L, H, Q, K)
    queries, keys = align(qa, qb), align(ka, kb)
    got = aligned_difference(a, b, queries, keys)
    for i in range(3):
        for j in range(4):
            bi = qb.index(qa[i]) if qa[i] in qb else None
            bj = kb.index(ka[j]) if ka[j] in kb else None
            if bi is None or bj is None:
                assert np.isnan(got[..., i, j]).all()
            else:
                np.testing.assert_array_equal(got[..., i, j], a[..., i, j] - b[..., bi, bj])
    with pytest.raises(ValueError, match="different heads"):
        aligned_difference(a, b[:1], queries, keys)


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(TransformerConfig.small(vocab_size=99, n_encoder_layers=2, n_decoder_layers=1, d_model=16,
                                               n_heads=2, d_k=4, d_v=4, d_ff=16, dropout=0.0)).eval()


def test_two_texts_through_one_model_compare_head_by_head(model):
    got = compare("The keys to the cabinet are", "The key to the cabinets is", "encoder.1.self_attn", 1, model=model,
                  max_new_tokens=2)
    assert isinstance(got, Comparison) and got.layers == (1,) and got.heads == (1,)
    a = maps_of(model, "The keys to the cabinet are", max_new_tokens=2)
    b = maps_of(model, "The key to the cabinets is", max_new_tokens=2)
    np.testing.assert_array_equal(got.a[0, 0], a["encoder.1.self_attn"][1])
    np.testing.assert_array_equal(got.b[0, 0], b["encoder.1.self_attn"][1])
    partner = got.queries.partner
    assert got.tokens_a[0][:8] == list("The keys") and list(partner[:7]) == list(range(7))  # "The key" in both
    assert partner[7] == -1  # the "s" of "keys" has no partner
    i, j = 2, 5  # "e" -> "y", both aligned
    assert got.difference[0, 0, i, j] == pytest.approx(got.a[0, 0, i, j] - got.b[0, 0, i, j])
    assert np.isnan(got.difference[0, 0, 7]).all() and np.isnan(got.difference[0, 0, :, 7]).all()
    assert "not aligned in a: 7:'s'" in got.summary()
    grid = compare(a, b, "encoder.self_attn")  # runs made already; every layer × head
    assert grid.a.shape[:2] == (2, 2) and grid.difference.shape == grid.a.shape


def test_two_models_on_one_text_and_refusals(model):
    torch.manual_seed(1)
    other = Transformer(TransformerConfig.small(vocab_size=99, n_encoder_layers=2, n_decoder_layers=1, d_model=16,
                                                n_heads=2, d_k=4, d_v=4, d_ff=16, dropout=0.0)).eval()
    got = compare(model, other, "encoder.0.self_attn", 0, text="abc", max_new_tokens=2)
    assert (got.queries.partner == np.arange(4)).all()  # one text: every position aligns
    np.testing.assert_allclose(got.difference, got.a - got.b)
    with pytest.raises(ValueError, match="needs the model"):
        compare("a", "b", "encoder.self_attn")
    with pytest.raises(ValueError, match="needs the text"):
        compare(model, other, "encoder.self_attn")
    with pytest.raises(ValueError, match="without their tokens"):
        compare({"encoder.0.self_attn": np.ones((1, 1, 1))}, "b", "encoder.self_attn", model=model)
    bigger = Transformer(TransformerConfig.small(vocab_size=99, n_encoder_layers=3, n_decoder_layers=1, d_model=16,
                                                 n_heads=2, d_k=4, d_v=4, d_ff=16, dropout=0.0)).eval()
    with pytest.raises(ValueError, match="different heads"):
        compare(model, bigger, "encoder.self_attn", text="abc", max_new_tokens=2)
    assert compare(model, bigger, "encoder.1.self_attn", 0, text="abc", max_new_tokens=2).a.shape == (1, 1, 4, 4)
    with pytest.raises(ValueError, match="neither a map key"):
        compare(model, other, "encoder.self", text="abc", max_new_tokens=2)
    assert isinstance(maps_of(model, "abc", max_new_tokens=2), TextMaps)
