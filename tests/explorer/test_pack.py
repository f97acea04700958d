"""pack: every map, mask and statistic of a run survives the trip to JSON and back, in a small payload."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention_viz.core.maps import KINDS, head_statistics, map_key
from attention_viz.explorer import explorer_html, pack, payload_bytes, show, to_json, unpack, unpack_biases
from attention_viz.explorer.pack import QUANT, default_masks

STEP = 0.5 / QUANT  # the largest quantisation error


def random_maps(rng, heads=3, s=5, t=4, layers=2):
    """Row-stochastic maps of every kind; queries x keys as AXES says."""
    shapes = {"encoder.self_attn": (s, s), "decoder.self_attn": (t, t), "decoder.cross_attn": (t, s)}
    maps = {}
    for kind, (q, k) in shapes.items():
        stack, name = kind.split(".")
        for i in range(layers):
            w = rng.random((heads, q, k)) ** 4
            maps[map_key(stack, i, name)] = (w / w.sum(-1, keepdims=True)).astype(np.float32)
    return maps


def test_round_trip_keeps_every_value_to_the_quantisation_step():
    rng = np.random.default_rng(0)
    maps = random_maps(rng)
    source, target = list("abcd") + ["<eos>"], ["<bos>", "d", "c", "b"]
    masks = default_masks(source, target)
    payload = json.loads(to_json(pack(maps, source, target, masks=masks, output="dcba", notes=["n"])))
    back, back_masks = unpack(payload)
    assert back.keys() == maps.keys()
    for key, weights in maps.items():
        assert back[key].shape == weights.shape
        assert np.abs(back[key] - weights).max() <= STEP + 1e-9, key
    for kind in KINDS:
        np.testing.assert_array_equal(back_masks[kind], masks[kind])
    assert payload["output"] == "dcba" and payload["notes"] == ["n"] and payload["n_heads"] == 3
    assert payload["tokens"] == {"source": source, "target": target}
    assert [entry["kind"] for entry in payload["kinds"]] == list(KINDS)


def test_zero_and_one_are_exact_and_statistics_are_the_cores():
    maps = {"encoder.0.self_attn": np.array([[[1.0, 0.0], [0.25, 0.75]]])}
    payload = pack(maps, ["a", "b"])
    back, masks = unpack(payload)
    assert back["encoder.0.self_attn"][0, 0].tolist() == [1.0, 0.0]
    assert masks["encoder.self_attn"].all()  # no mask given: nothing masked
    stats = head_statistics(np.stack([maps["encoder.0.self_attn"]]))
    entry = payload["kinds"][0]
    assert [k["kind"] for k in payload["kinds"]] == ["encoder.self_attn"]  # only the kinds present
    for name, values in entry["stats"].items():
        np.testing.assert_allclose(values, np.round(stats[name], 4))


def test_masks_follow_the_model_convention():
    masks = default_masks(["a", "<eos>", "<pad>"], ["<bos>", "x"], causal_mask=True, padding_mask=True)
    assert masks["encoder.self_attn"].tolist() == [[True, True, False]] * 3
    assert masks["decoder.self_attn"].tolist() == [[True, False], [True, True]]
    assert masks["decoder.cross_attn"].tolist() == [[True, True, False]] * 2
    off = default_masks(["a", "<pad>"], ["<bos>", "x"], causal_mask=False, padding_mask=False)
    assert all(mask.all() for mask in off.values())


@pytest.mark.parametrize("maps, tokens, message", [
    ({"encoder.0.self_attn": np.ones((1, 2, 3))}, ["a", "b"], "shape"),
    ({"encoder.0.self_attn": np.full((1, 2, 2), np.nan)}, ["a", "b"], "finite"),
    ({"encoder.0.attn": np.ones((1, 2, 2))}, ["a", "b"], "unknown map keys"),
    ({}, ["a"], "no attention maps"),
])
def test_bad_input_is_refused_with_a_reason(maps, tokens, message):
    with pytest.raises(ValueError, match=message):
        pack(maps, tokens)


def test_heads_must_agree_between_layers():
    maps = {"encoder.0.self_attn": np.ones((2, 1, 1)), "encoder.1.self_attn": np.ones((3, 1, 1))}
    with pytest.raises(ValueError, match="heads"):
        pack(maps, ["a"])


def test_value_norms_travel_per_kind_and_layer_to_four_significant_digits():
    rng = np.random.default_rng(3)
    maps = random_maps(rng)
    source, target = list("abcde"), list("wxyz")
    norms = {key: rng.random((3, w.shape[2])) * 10.0 ** rng.integers(-3, 3) for key, w in maps.items()}
    payload = pack(maps, source, target, value_norms=norms)
    for entry in payload["kinds"]:
        stack, name = entry["kind"].split(".")
        for i, layer in enumerate(entry["norms"]):
            np.testing.assert_allclose(layer, norms[map_key(stack, i, name)], rtol=5e-4, atol=0)
    json.dumps(payload)
    assert all("norms" not in entry for entry in pack(maps, source, target)["kinds"])
    one = dict(norms)
    del one["decoder.1.cross_attn"]
    for bad, message in ((one, "no decoder.1.cross_attn"),
                         ({**norms, "encoder.0.self_attn": np.ones((3, 4))}, r"shape \[3, 4\], expected"),
                         ({**norms, "encoder.0.self_attn": -np.ones((3, 5))}, "not negative"),
                         ({**norms, "encoder.0.self_attn": np.full((3, 5), np.nan)}, "finite")):
        with pytest.raises(ValueError, match=message):
            pack(maps, source, target, value_norms=bad)


def test_position_biases_travel_exactly_once_per_distinct_layer_with_their_range_where_queries_may_attend():
    rng = np.random.default_rng(4)
    maps = random_maps(rng)
    source, target = list("abcde"), list("wxyz")
    shared = (rng.standard_normal((3, 4, 4)) * 5).astype(np.float32)  # T5: one B a stack, shared by its layers
    shared[1, 0, 3] = -100.0  # a future key's: masked, left out of the range
    biases = {"encoder.0.self_attn": (rng.standard_normal((3, 5, 5)) * 3).astype(np.float32),  # layer 1 adds none
              "decoder.0.self_attn": shared, "decoder.1.self_attn": shared.copy()}
    masks = default_masks(source, target)
    payload = pack(maps, source, target, masks=masks, biases=biases)
    kinds = {entry["kind"]: entry for entry in payload["kinds"]}
    assert kinds["encoder.self_attn"]["bias"]["maps"][1] is None and kinds["decoder.self_attn"]["bias"]["maps"][1] == 0
    assert "bias" not in kinds["decoder.cross_attn"] and "position_bias" not in payload
    back = unpack_biases(json.loads(to_json(payload)))
    assert sorted(back) == sorted(biases)
    for key, bias in biases.items():
        np.testing.assert_array_equal(back[key], bias)  # float32, exact
    causal = masks["decoder.self_attn"]  # the range counts the cells a query may attend only
    assert kinds["decoder.self_attn"]["bias"]["range"] == pytest.approx(float(np.abs(shared[:, causal]).max()))
    assert np.abs(shared).max() > np.abs(shared[:, causal]).max()  # (the test can tell the two apart)
    assert pack(maps, source, target, biases={}, position_bias=False)["position_bias"] is False
    for bad, message in (({"encoder.0.self_attn": np.ones((3, 4, 4))}, r"shape \[3, 4, 4\], expected \[3, 5, 5\]"),
                         ({"encoder.0.self_attn": np.full((3, 5, 5), np.inf)}, "finite")):
        with pytest.raises(ValueError, match=message):
            pack(maps, source, target, biases=bad)


def test_masks_norms_and_scores_are_written_as_read_one_by_one():
    """The payload's masks ("1" may attend), value norms (f"{v:.4g}" read back) and scores (4 decimals, NaN -> null)
    are what writing each value alone gives, for masks in either memory order, any magnitude, -0 and NaN."""
    rng = np.random.default_rng(7)
    for trial in range(40):
        heads, s, t = (int(n) for n in rng.integers(1, 7, size=3))
        maps = random_maps(rng, heads=heads, s=s, t=t)
        masks = {kind: rng.random(maps[map_key(*kind.split(".")[:1], 0, kind.split(".")[1])].shape[1:]) < 0.6
                 for kind in KINDS}
        masks = {kind: np.asfortranarray(mask) if trial % 2 else mask for kind, mask in masks.items()}
        norms = {key: rng.random((heads, w.shape[2])) * 10.0 ** float(rng.integers(-9, 9)) for key, w in maps.items()}
        norms["encoder.0.self_attn"][0, 0] = -0.0
        scores = {kind: {"values": {"first": np.where(rng.random((2, heads)) < 0.3, np.nan,
                                                      rng.standard_normal((2, heads)))}} for kind in KINDS}
        payload = pack(maps, [f"s{i}" for i in range(s)], [f"t{i}" for i in range(t)], masks=masks,
                       value_norms=norms, scores=scores)
        for entry in payload["kinds"]:
            kind, (stack, name) = entry["kind"], entry["kind"].split(".")
            assert entry["mask"] == ["".join("1" if cell else "0" for cell in row) for row in masks[kind]]
            for i, layer in enumerate(entry["norms"]):
                one_by_one = [[float(f"{v:.4g}") for v in row] for row in norms[map_key(stack, i, name)]]
                assert repr(layer) == repr(one_by_one)  # repr: -0.0 stays -0.0
            assert entry["scores"]["values"]["first"] == [[None if np.isnan(v) else round(float(v), 4) for v in row]
                                                          for row in scores[kind]["values"]["first"]]
        assert repr(payload["kinds"][0]["norms"][0][0][0]) == "-0.0"


def test_a_shipped_model_run_matches_its_arrays(shipped_model, shipped_payload):
    import torch

    from attention_viz.data.tokenizer import CharTokenizer

    tok = CharTokenizer()

    payload = shipped_payload
    tokens = payload["tokens"]
    assert tokens["source"][-3:] == ["<eos>", "<pad>", "<pad>"] and tokens["target"][0] == "<bos>"
    assert payload["output"] == "olleh"
    src = torch.tensor([tok.encode("hello").ids + [tok.pad_id] * 2])  # the packed run's source and decoder input
    tgt = torch.tensor([[tok.bos_id] + tok.encode("olleh", add_eos=False).ids])
    with torch.inference_mode():
        _, maps = shipped_model(src, tgt)
    back, masks = unpack(payload)
    for key, value in maps.to_numpy().items():
        assert np.abs(back[key] - value[0]).max() <= STEP + 1e-6, key
    assert not masks["decoder.self_attn"][0, 1] and not masks["encoder.self_attn"][:, -1].any()


def test_payload_sizes(shipped_model, shipped_payload, widest_payload):
    """What one run costs on the wire (compact JSON, before gzip); the report quotes these numbers."""
    from attention_viz.explorer.notebook import run_model

    full_text = run_model(shipped_model, "abcdefghijklmnopqrst")
    sizes = {"shipped, 5 chars + 2 pads": payload_bytes(shipped_payload),
             "shipped, 20 chars": payload_bytes(full_text), "widest untrained": payload_bytes(widest_payload)}
    print(sizes)
    assert sizes["shipped, 20 chars"] < 40_000
    # 2·16·(49·49 + 33·33 + 33·49) = 163,424 weights at 2 bytes, base64: ~436 KB + tokens, masks, statistics,
    # and the value norms, 2·16·(49 + 33 + 49) = 4,192 numbers of ~8 characters: ~35 KB
    assert sizes["widest untrained"] < 510_000
    assert [len(widest_payload["tokens"][k]) for k in ("source", "target")] == [49, 33]


def test_html_is_self_contained_and_script_safe():
    maps = {"encoder.0.self_attn": np.ones((1, 2, 2)) / 2}
    html = explorer_html(pack(maps, ["</script>", "<b>&"], output="</script><script>alert(1)</script>"))
    assert html.count("</script>") == 3  # the payload, the library, the mount: no token closes one early
    assert "src=" not in html and "http" not in html  # nothing fetched: no CDN
    assert 'data-av-root="explorer"' in html and 'data-av-head-view="head_view"' in html
    assert 'data-av-head-view="second-head"' in explorer_html(pack(maps, ["a", "b"]), root_id="second")
    with pytest.raises(ValueError, match="root_id"):
        explorer_html(pack(maps, ["a", "b"]), root_id='x" onload="alert(1)')


def test_show_takes_maps_or_a_model(shipped_model):
    maps = {"encoder.0.self_attn": np.ones((1, 1, 2, 2)) / 2}  # a batch axis of 1 is dropped
    first, second = show(maps, ["a", "b"]), show(shipped_model, "abc")
    assert first.root_id != second.root_id
    assert second.payload["output"] == "cba"
    page = second._repr_html_()
    assert page.startswith("<iframe") and "srcdoc=" in page and "<script" not in page.split("srcdoc=")[0]
    with pytest.raises(ValueError, match="only to show"):
        show(maps, ["a", "b"], causal_mask=False)


def test_a_run_without_cross_attention_opens_on_its_first_kinds_last_layer():
    weights = np.full((2, 3, 3), 1 / 3)
    encoder_only = pack({"encoder.0.self_attn": weights, "encoder.1.self_attn": weights}, ["a", "b", "<eos>"])
    assert encoder_only["opening"] == {"kind": "encoder.self_attn", "layer": 1, "head": 0}
