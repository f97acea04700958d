"""AttentionMaps and the key helpers: Python indexing in select, kind keys and stacks built in one place."""

import numpy as np
import pytest
import torch

from attention_viz import AttentionMaps, Transformer, TransformerConfig
from attention_viz.core.maps import KINDS, MapKey, in_order, keys_of, kind_key, kind_of, layers_of, map_key, stack_kind, weight_on


@pytest.fixture(scope="module")
def maps() -> AttentionMaps:
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.small(vocab_size=20, n_encoder_layers=2, n_decoder_layers=3, d_model=16,
                                                n_heads=2, d_k=4, d_v=4, d_ff=16, dropout=0.0)).eval()
    src, tgt = torch.randint(1, 20, (3, 5)), torch.randint(1, 20, (3, 4))
    with torch.no_grad():
        return model(src, tgt)[1]


@pytest.mark.parametrize("index", [-3, -2, -1, 0, 1, 2])
def test_select_follows_python_indexing(maps, index):
    one = maps.select(index)
    assert list(one) == list(maps)
    for key in maps:
        assert one[key].shape[0] == 1
        assert torch.equal(one[key][0], maps[key][index])


@pytest.mark.parametrize("index", [3, 4, -4, 100])
def test_select_out_of_range_raises_index_error(maps, index):
    with pytest.raises(IndexError):
        maps.select(index)


def test_select_refuses_a_non_integer(maps):
    with pytest.raises(TypeError):
        maps.select(1.0)


def test_kind_key_builds_the_map_keys():
    assert kind_key("encoder.self_attn", 0) == "encoder.0.self_attn" == map_key("encoder", 0, "self_attn")
    assert kind_key("decoder.self_attn", 2) == "decoder.2.self_attn"
    assert kind_key("decoder.cross_attn", 1) == "decoder.1.cross_attn"
    with pytest.raises(KeyError):
        kind_key("encoder.cross_attn", 0)


def test_a_map_key_is_parsed_once_into_its_parts_and_written_back():
    key = MapKey.parse("decoder.1.cross_attn")
    assert (key.stack, key.layer, key.name, key.kind) == ("decoder", 1, "cross_attn", "decoder.cross_attn")
    assert str(key) == "decoder.1.cross_attn" and MapKey.of("decoder.cross_attn", 1) == key
    assert kind_of("encoder.12.self_attn") == "encoder.self_attn"
    for bad in ("encoder.self_attn", "encoder.x.self_attn", "encoder.0.cross_attn", "decoder.1.cross_attn.q", 3, ""):
        with pytest.raises(ValueError, match="is not a map key"):
            MapKey.parse(bad)
    keys = keys_of(2, 3)
    assert in_order(reversed(keys)) == keys == [str(MapKey.parse(k)) for k in keys]
    assert layers_of(keys, "decoder.cross_attn") == 3 and layers_of(keys[:1], "encoder.self_attn") == 1


@pytest.mark.parametrize("kind", list(KINDS))
def test_stack_kind_for_torch_and_numpy_and_the_kind_method(maps, kind):
    n_layers = 2 if kind.startswith("encoder") else 3
    stacked = stack_kind(maps, kind, n_layers)  # (L, B, H, Q, K)
    assert isinstance(stacked, torch.Tensor) and stacked.shape[0] == n_layers
    assert torch.equal(stacked, maps.kind(kind))
    assert torch.equal(stack_kind(maps, kind), stacked)  # n_layers found from the keys
    for i in range(n_layers):
        assert torch.equal(stacked[i], maps[kind_key(kind, i)])
    one = {key: value[0] for key, value in maps.select(1).to_numpy().items()}  # the app's [H, Q, K] per key
    as_numpy = stack_kind(one, kind, n_layers)  # (L, H, Q, K)
    assert isinstance(as_numpy, np.ndarray) and as_numpy.shape == stacked.shape[:1] + stacked.shape[2:]
    np.testing.assert_array_equal(as_numpy, stacked[:, 1].numpy())
    with pytest.raises(KeyError):
        stack_kind(one, kind, n_layers + 1)
    with pytest.raises(KeyError):
        maps.kind("decoder.nothing")


def test_weight_on_measures_the_weight_on_target_keys():
    """weight_on against a loop in float64: per head, the mean over rows with a target of the weight on it."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        h, q, k = rng.integers(1, 4), rng.integers(1, 7), rng.integers(1, 7)
        p = rng.random((2, h, q, k))
        p[..., rng.integers(q), :] = 0.0  # a fully masked row is left out
        p /= np.maximum(p.sum(-1, keepdims=True), 1e-300)
        targets = rng.random((q, k)) < 0.3
        got = weight_on(p, targets)
        assert got.shape == (2, h)
        for index in np.ndindex(2, h):
            rows = [i for i in range(q) if targets[i].any() and p[index][i].sum() > 0]
            want = np.mean([p[index][i][targets[i]].sum() for i in rows]) if rows else np.nan
            np.testing.assert_allclose(got[index], want, rtol=1e-12, equal_nan=True)
    p32 = rng.random((2, 3, 5, 6)).astype(np.float32)  # the app's maps are float32: no float64 copy, same result
    p32 /= p32.sum(-1, keepdims=True)
    targets = rng.random((5, 6)) < 0.4
    np.testing.assert_allclose(weight_on(p32, targets), weight_on(p32.astype(np.float64), targets), rtol=1e-6)
    eye = np.eye(3)[None]
    assert weight_on(eye, np.eye(3, dtype=bool))[0] == 1.0
    assert weight_on(eye, ~np.eye(3, dtype=bool))[0] == 0.0
    with pytest.raises(ValueError, match="targets have shape"):
        weight_on(eye, np.eye(2, dtype=bool))
