"""The service: checks, requests, model families, the run cache, masks and scaling, steps, compare, exports."""

import csv
import inspect
import io
import json
import math
import threading

import numpy as np
import pytest
import torch

from attention_viz.core.attention import attention_steps
from attention_viz.core.maps import KINDS, kind_key
from attention_viz.data.checkpoints import UnsafeCheckpointError
from attention_viz.service.checks import check_bool, check_choice, check_float, check_int, check_text
from attention_viz.service.exports import head_csv, maps_npz
from attention_viz.service.limits import MAX_HEAD_WIDTH, UNTRAINED
from attention_viz.service.runs import Runs
from attention_viz.data.tasks import target
from tests.service.conftest import own

# ------------------------------------------------------------------------------ validation


def test_over_long_text_says_the_maximum():
    with pytest.raises(ValueError, match=r"^Text is 31 characters; the maximum is 20\.$"):
        check_text("x" * 31, 20)
    with pytest.raises(ValueError, match="Text is 100000 characters; the maximum is 32."):
        check_text("x" * 100_000, 32)
    assert check_text("x" * 32, 32) == "x" * 32


def test_unknown_characters_are_named():
    with pytest.raises(ValueError) as error:
        check_text("café 😀 é", 20)
    assert str(error.value).startswith("Unknown characters: 'é', '😀'.")
    with pytest.raises(ValueError, match=r"Unknown characters: '\\n'"):
        check_text("a\nb", 20)


@pytest.mark.parametrize("text, message", [("", "Text is empty"), (None, "Text must be a string"),
                                           (42, "Text must be a string")])
def test_empty_or_missing_text(text, message):
    with pytest.raises(ValueError, match=message):
        check_text(text, 20)


def test_printable_ascii_is_accepted():
    assert check_text("Hello, World! ~{}", 20) == "Hello, World! ~{}"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_are_refused(value):
    with pytest.raises(ValueError, match="finite"):
        check_int("d_k", value, 1, 1024)
    with pytest.raises(ValueError, match="finite"):
        check_float("factor", value, 0.001, 100)


@pytest.mark.parametrize("value, message", [(2.5, "whole number"), (True, "whole number"), ("abc", "whole number"),
                                            (None, "whole number"), (0, "between 1 and 1024, got 0"),
                                            (2048, "between 1 and 1024, got 2048")])
def test_bad_integers(value, message):
    with pytest.raises(ValueError, match=message):
        check_int("d_k", value, 1, 1024)


@pytest.mark.parametrize("value", [10**400, -10**400, 2**1100, 10**20])
def test_whole_numbers_beyond_any_float_are_refused_by_range(value):
    """JSON carries integers of any size; no float holds 10**400 (math.isfinite would raise OverflowError)."""
    with pytest.raises(ValueError, match="between 1 and 1024") as error:
        check_int("d_k", value, 1, 1024)
    assert len(str(error.value)) < 90  # the number cut, not echoed whole
    with pytest.raises(ValueError, match="between 0.001 and 100") as error:
        check_float("factor", value, 0.001, 100)
    assert len(str(error.value)) < 90


def test_refusals_never_echo_a_whole_oversized_input(runs):
    """Each check names what came, cut to 40 characters."""
    huge = "y" * 100_000
    refusals = [lambda: check_bool("causal mask", huge), lambda: check_int("d_k", huge, 1, 1024),
                lambda: check_float("factor", huge, 0.001, 100), lambda: check_choice("scaling", huge, {"a": "A"}),
                lambda: runs.settings("abc", huge, 16), lambda: check_int("d_k", 1e308, 1, 1024)]
    for refuse in refusals:
        with pytest.raises(ValueError) as error:
            refuse()
        message = str(error.value)
        assert "y" * 40 not in message and len(message) < 400, message[:200]
    with pytest.raises(ValueError, match=r"got 1e\+308$"):
        check_int("d_k", 1e308, 1, 1024)


def test_integers_from_floats_and_strings():
    assert check_int("d_k", 16.0, 1, 1024) == 16
    assert check_int("d_k", " 32 ", 1, 1024) == 32


@pytest.mark.parametrize("value, expected", [(True, True), (False, False), (1, True), (0, False), (None, False),
                                             ("true", True), ("False", False), ("on", True), ("off", False),
                                             ("1", True), ("0", False), ("", False), (1.0, True)])
def test_booleans_are_coerced(value, expected):
    assert check_bool("causal mask", value) is expected


@pytest.mark.parametrize("value", ["maybe", 2, [True], 0.5])
def test_bad_booleans(value):
    with pytest.raises(ValueError, match="causal mask must be true or false"):
        check_bool("causal mask", value)


def test_choices_by_key_or_label():
    assert check_choice("attention kind", "decoder.cross_attn", KINDS) == "decoder.cross_attn"
    assert check_choice("attention kind", "encoder-decoder attention", KINDS) == "decoder.cross_attn"
    with pytest.raises(ValueError, match="attention kind must be one of 'encoder.self_attn'"):
        check_choice("attention kind", "cross", KINDS)


# ------------------------------------------------------------------------------ models and settings


def test_families_group_the_trained_d_k(runs):
    assert set(runs.catalog.families) == {"reverse/sqrt_dk", "copy/none"}
    assert runs.catalog.families["reverse/sqrt_dk"].d_ks == [4, 16, 64]
    assert [value for _, value in runs.catalog.model_choices] == ["reverse/sqrt_dk", "copy/none", UNTRAINED]
    assert runs.catalog.default_model == "reverse/sqrt_dk"
    assert runs.catalog.default_d_k("reverse/sqrt_dk") == 16


@pytest.mark.parametrize("requested, used", [(1, 4), (4, 4), (8, 4), (9, 16), (24, 16), (40, 64), (1024, 64)])
def test_d_k_snaps_to_the_nearest_trained_member_on_a_log_scale(runs, requested, used):
    settings = runs.settings("abc", "reverse/sqrt_dk", requested)
    assert settings.d_k == used
    assert settings.checkpoint == f"reverse_dk{used}_sqrt_dk"
    assert (settings.d_model, settings.n_heads) == (16, 2)  # from the card, whatever the untrained controls say


def test_unknown_or_path_like_model_names_are_refused(runs, tmp_path):
    for name in ("nope", "../../etc/passwd", "/etc/passwd", "reverse_dk16_sqrt_dk", None):
        with pytest.raises(ValueError, match="Unknown model"):
            runs.settings("abc", name, 16)


def test_untrained_model_size_is_bounded(runs):
    with pytest.raises(ValueError, match=f"heads × d_k is 16 × 1024 = 16384; .* at most {MAX_HEAD_WIDTH}"):
        runs.settings("abc", UNTRAINED, 1024, n_heads=16, d_model=64)
    with pytest.raises(ValueError, match="d_model must be between 8 and 512"):
        runs.settings("abc", UNTRAINED, 16, d_model=4)


def test_sized_cache_keeps_recent_values_within_its_bytes():
    from attention_viz.service.catalog import SizedCache

    built = []
    cache = SizedCache(lambda n: built.append(n) or "x" * n, max_bytes=10, size_of=len)
    assert cache(4) == "xxxx" and cache(4) == "xxxx" and built == [4]  # kept
    cache(5)
    assert cache.bytes == 9
    cache(3)  # 4 + 5 + 3 > 10: the oldest (4) goes
    assert cache.bytes == 8 and cache(4) == "xxxx" and built == [4, 5, 3, 4]
    cache(11)  # larger than the whole budget: returned, never kept
    assert cache.bytes <= 10 and cache(11) and built[-2:] == [11, 11]


def test_sized_cache_builds_side_by_side_unless_serial_and_counts_hits():
    import threading

    from attention_viz.service.catalog import SizedCache

    both = threading.Barrier(2, timeout=5)  # each build waits for the other: only side by side do both finish
    cache = SizedCache(lambda n: both.wait() or n, max_bytes=10, size_of=lambda n: 1, serial=False)
    threads = [threading.Thread(target=cache, args=(n,)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not both.broken and (cache.cache_info().misses, cache.cache_info().currsize) == (2, 2)
    assert cache(1) == 1 and cache.cache_info().hits == 1
    apart = threading.Barrier(2, timeout=0.5)  # the same test, serial: the second build waits for the first
    serial = SizedCache(lambda n: apart.wait() or n, max_bytes=10, size_of=lambda n: 1)
    failed = []
    threads = [threading.Thread(target=lambda n=n: failed.append(_raises(serial, n))) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert apart.broken and failed == [True, True]


def _raises(call, *args) -> bool:
    try:
        call(*args)
    except Exception:  # noqa: BLE001 - the test asks only whether it raised
        return True
    return False


def test_a_class_worth_of_runs_stays_cached_and_memory_stays_bounded(runs):
    from attention_viz.service.runs import Runs, run_bytes

    texts = [f"student {i}" for i in range(100)]  # a class, each at a text of its own
    settings = [runs.settings(text, "reverse/sqrt_dk", 16) for text in texts]
    for s in settings:
        runs.run(s)
    misses = runs.run.cache_info().misses
    for s in settings:
        runs.run(s)
    assert runs.run.cache_info().misses == misses  # every student's run still there
    one = run_bytes(runs.run(settings[0]))
    small = Runs(runs.catalog, run_cache_bytes=10 * one)
    for s in settings[:20]:
        small.run(s)
    assert small.run.bytes <= 10 * one and small.run.cache_info().currsize < 20  # the oldest went


def test_untrained_models_are_kept_within_a_memory_budget(runs):
    from attention_viz.service.catalog import parameter_bytes
    from attention_viz.service.limits import UNTRAINED_CACHE_BYTES

    small = own(runs, runs.settings("abc", UNTRAINED, 16, d_model=32, n_heads=2))[0]
    assert own(runs, runs.settings("abc", UNTRAINED, 16, d_model=32, n_heads=2))[0] is small
    large_settings = runs.settings("abc", UNTRAINED, 512, d_model=512, n_heads=8)
    large = own(runs, large_settings)[0]
    assert parameter_bytes(large) > UNTRAINED_CACHE_BYTES  # too big to keep: built again when needed
    assert own(runs, large_settings)[0] is not large
    assert runs.catalog._untrained.bytes <= UNTRAINED_CACHE_BYTES


def test_scale_modes(runs):
    assert runs.settings("abc", UNTRAINED, 16, "sqrt_dk").scale == "sqrt_dk"
    assert runs.settings("abc", UNTRAINED, 16, "off (plain q·k)").scale == "none"
    assert runs.settings("abc", UNTRAINED, 16, "custom", 0.5).scale == 0.5
    with pytest.raises(ValueError, match="custom scale factor must be a finite number"):
        runs.settings("abc", UNTRAINED, 16, "custom", float("nan"))
    with pytest.raises(ValueError, match="scaling must be one of"):
        runs.settings("abc", UNTRAINED, 16, "sqrt")


# ------------------------------------------------------------------------------ runs


def test_runs_are_cached_by_the_settings(runs):
    a = runs.run(runs.settings("cache", UNTRAINED, 16))
    assert runs.run(runs.settings("cache", UNTRAINED, 16)) is a
    assert runs.run(runs.settings("cache", UNTRAINED, 32)) is not a
    assert runs.run(runs.settings("cache", "reverse/sqrt_dk", 20)) is runs.run(
        runs.settings("cache", "reverse/sqrt_dk", 16))  # both snap to d_k = 16


def test_the_visualization_is_the_whole_run_packed_once(runs, views):
    """One packed run holds every kind, layer and head (the browser draws every view from it): no view asks again."""
    from attention_viz.explorer import unpack

    settings = runs.settings("viewonly", "reverse/sqrt_dk", 16, pad_tokens=1)
    view = views.visualize(settings)
    run = runs.run(settings)
    maps, masks = unpack(view.run)
    assert maps.keys() == run.maps.keys()
    for key, weights in run.maps.items():
        np.testing.assert_allclose(maps[key], weights, atol=0.5 / 65535 + 1e-7)
    for kind in KINDS:
        np.testing.assert_array_equal(masks[kind], run.mask(kind))
        entry = next(e for e in view.run["kinds"] if e["kind"] == kind)
        stats = run.statistics(kind)  # rows [layer, head, entropy, max weight, mean distance, diagonal]
        assert [[entry["stats"]["entropy"][row[0]][row[1]]] for row in stats] == [[row[2]] for row in stats]
    assert view.run["tokens"] == {"source": list(run.src_tokens), "target": list(run.tgt_tokens)}
    assert view.run["output"] == run.output and view.output.startswith(run.output)
    assert view.info == "\n\n".join(view.run["notes"]) and "Scores QKᵀ" in view.info
    assert view.run["settings"] == {"text": "viewonly", "model": "reverse/sqrt_dk", "checkpoint": "reverse_dk16_sqrt_dk",
                                    "d_k": 16, "scale": "sqrt_dk", "causal_mask": True, "padding_mask": True,
                                    "pad_tokens": 1, "d_model": 16, "n_heads": 2, "heads_off": {},
                                    "ablation": "zero"}
    misses = runs.run.cache_info().misses
    assert views.visualize(settings).run is view.run  # packed once per run, then kept
    assert runs.run.cache_info().misses == misses
    snapped = views.visualize(settings, requested_d_k=20)
    assert snapped.run["notes"][0] == "No trained model with d_k = 20; showing the nearest, d_k = 16."
    assert snapped.info.startswith(snapped.run["notes"][0]) and view.run["notes"][0] != snapped.run["notes"][0]


def test_maps_shapes_tokens_and_rows(runs):
    run = runs.run(runs.settings("hello", "reverse/sqrt_dk", 16, pad_tokens=3))
    assert run.src_tokens == ("h", "e", "l", "l", "o", "<eos>", "<pad>", "<pad>", "<pad>")
    assert run.tgt_tokens[0] == "<bos>" and len(run.tgt_tokens) == len(run.generated)
    S, T, H = 9, len(run.generated), 2
    assert run.weights("encoder.self_attn").shape == (2, H, S, S)
    assert run.weights("decoder.self_attn").shape == (2, H, T, T)
    assert run.weights("decoder.cross_attn").shape == (2, H, T, S)
    for kind in KINDS:
        np.testing.assert_allclose(run.weights(kind).sum(-1), 1.0, atol=1e-5)
        queries, keys = run.tokens(kind)
        assert run.weights(kind).shape[-2:] == (len(queries), len(keys))
    with pytest.raises(ValueError):
        run.maps["encoder.0.self_attn"][0, 0, 0] = 1.0  # cached maps are shared between users: read-only


def test_the_cached_maps_are_those_of_one_forward_pass(runs):
    settings = runs.settings("forward", "reverse/sqrt_dk", 64, causal_mask=False, pad_tokens=2)
    run = runs.run(settings)
    again = runs.teacher_forced_maps(run, settings)
    for key, value in run.maps.items():
        np.testing.assert_allclose(value, again[key], atol=1e-6)


def test_padding_mask_zeroes_pad_keys_exactly(runs):
    on = runs.run(runs.settings("pads", UNTRAINED, 16, padding_mask=True, pad_tokens=4))
    off = runs.run(runs.settings("pads", UNTRAINED, 16, padding_mask=False, pad_tokens=4))
    for kind in ("encoder.self_attn", "decoder.cross_attn"):
        assert (on.weights(kind)[..., -4:] == 0.0).all()
        assert (off.weights(kind)[..., -4:] > 0.0).all()
        assert (on.mask(kind)[:, -4:] == False).all() and off.mask(kind).all()  # noqa: E712


def test_causal_mask_zeroes_the_future_exactly(runs):
    on = runs.run(runs.settings("future", UNTRAINED, 16, causal_mask=True))
    off = runs.run(runs.settings("future", UNTRAINED, 16, causal_mask=False))
    T = on.weights("decoder.self_attn").shape[-1]
    upper = np.triu(np.ones((T, T), dtype=bool), k=1)
    assert (on.weights("decoder.self_attn")[..., upper] == 0.0).all()
    assert (off.weights("decoder.self_attn")[..., upper] > 0.0).all()
    assert (on.mask("decoder.self_attn") == ~upper).all()


def test_scaling_modes_are_factors(runs):
    d_k = 64
    paper = runs.run(runs.settings("scale", UNTRAINED, d_k, "sqrt_dk"))
    custom = runs.run(runs.settings("scale", UNTRAINED, d_k, "custom", 1 / math.sqrt(d_k)))
    plain = runs.run(runs.settings("scale", UNTRAINED, d_k, "none"))
    one = runs.run(runs.settings("scale", UNTRAINED, d_k, "custom", 1.0))
    for key in paper.maps:
        np.testing.assert_allclose(paper.maps[key], custom.maps[key], atol=1e-5)
        np.testing.assert_allclose(plain.maps[key], one.maps[key], atol=1e-5)
    assert not np.allclose(paper.maps["encoder.0.self_attn"], plain.maps["encoder.0.self_attn"], atol=1e-3)


def test_untrained_models_are_reproducible(models_dir, runs):
    settings = runs.settings("seeded", UNTRAINED, 8, d_model=32, n_heads=2)
    fresh = Runs(models_dir).run(settings)
    for key, value in runs.run(settings).maps.items():
        np.testing.assert_array_equal(value, fresh.maps[key])


def test_trained_runs_know_their_task(runs):
    run = runs.run(runs.settings("abc", "reverse/sqrt_dk", 16))
    assert run.trained and run.expected == target("reverse", "abc") == "cba"
    assert len(run.generated) <= len("abc") + 1 + 4  # a trained model may overrun by a few tokens, no more
    untrained = runs.run(runs.settings("abc", UNTRAINED, 16))
    assert not untrained.trained and untrained.expected is None
    assert len(untrained.generated) == len("abc") + 1  # as many tokens as the source has


def test_head_checks_layer_and_head_against_the_model(runs):
    run = runs.run(runs.settings("abc", "reverse/sqrt_dk", 16))
    assert run.head("decoder.cross_attn", 1, 1).shape == run.weights("decoder.cross_attn")[1, 1].shape
    with pytest.raises(ValueError, match="layer must be between 0 and 1, got 2"):
        run.head("encoder.self_attn", 2, 0)
    with pytest.raises(ValueError, match="head must be between 0 and 1, got 5"):
        run.head("encoder.self_attn", 0, 5)


def test_statistics_rows(runs):
    run = runs.run(runs.settings("statistics", "reverse/sqrt_dk", 16))
    rows = run.statistics("encoder.self_attn")
    assert [row[:2] for row in rows] == [[0, 0], [0, 1], [1, 0], [1, 1]]
    S = len(run.src_tokens)
    for _, _, entropy, max_weight, distance, diagonal in rows:
        assert 0 <= entropy <= math.log(S) + 1e-6 and 1 / S - 1e-6 <= max_weight <= 1
        assert 0 <= distance <= S - 1 and 0 <= diagonal <= max_weight


# ------------------------------------------------------------------------------ steps and compare


@pytest.mark.parametrize("kind", list(KINDS))
def test_steps_reproduce_the_recorded_head(runs, kind):
    settings = runs.settings("steps", "reverse/sqrt_dk", 64, pad_tokens=2)
    run = runs.run(settings)
    steps = runs.steps(settings, kind, 1, 1)
    a = steps.arrays
    np.testing.assert_allclose(a["weights"], run.head(kind, 1, 1), atol=1e-6)
    np.testing.assert_allclose(a["scaled"], a["scores"] / 8.0, rtol=1e-5, atol=1e-6)  # 1/√64
    assert steps.factor == 1 / 8
    assert (np.isneginf(a["masked"]) == ~run.mask(kind)).all()
    assert a["output"].shape == (len(steps.query_tokens), 8)  # [Q, d_v]
    assert (steps.query_tokens, steps.key_tokens) == run.tokens(kind)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("model, switches", [
    ("reverse/sqrt_dk", dict(pad_tokens=2)),
    ("copy/none", dict(causal_mask=False, padding_mask=False, pad_tokens=1)),
    (UNTRAINED, dict(scale="custom", factor=0.5, causal_mask=False, pad_tokens=3)),
])
def test_steps_are_eq1_on_the_inputs_forward_gives_that_attention(runs, kind, model, switches):
    """The test (never the service) hooks the attention in a forward pass on the run's ids: every intermediate of
    every head equals the step view's exactly, the weights are forward's map, and the mask equals run.mask."""
    switches = dict(switches)
    scale = (switches.pop("scale"), switches.pop("factor")) if "scale" in switches else ("sqrt_dk",)
    settings = runs.settings("inputs", model, 16, *scale, **switches)
    run = runs.run(settings)
    net, _ = own(runs, settings)
    for layer in range(run.n_layers(kind)):
        module = net.attention_module(kind, layer)
        calls = []
        handle = module.register_forward_pre_hook(
            lambda m, args, kwargs: calls.append(inspect.signature(m.forward).bind(*args, **kwargs).arguments),
            with_kwargs=True)
        try:
            forward_maps = runs.teacher_forced_maps(run, settings)  # one forward pass on src_ids, tgt_ids
        finally:
            handle.remove()
        (call,) = calls
        Q, K = len(run.ids(kind)[0]), len(run.ids(kind)[1])
        mask = call.get("mask")
        dense = np.ones((Q, K), bool) if mask is None else torch.broadcast_to(mask, (1, 1, Q, K))[0, 0].numpy()
        np.testing.assert_array_equal(run.mask(kind), dense)
        with torch.inference_mode():
            q, k, v = module.project(call["query"], call["key"], call["value"])  # (1, H, Q, d_k), ...
        for head in range(q.size(1)):
            with torch.inference_mode():
                expected = attention_steps(q[0, head], k[0, head], v[0, head],
                                           None if mask is None else torch.from_numpy(dense), call.get("scale", "sqrt_dk"))
            steps = runs.steps(settings, kind, layer, head)
            assert set(steps.arrays) == set(expected)
            for name, array in expected.items():
                np.testing.assert_array_equal(steps.arrays[name], array.float().numpy(), err_msg=f"{layer} {head} {name}")
            # forward's batched [1, H, Q, K] matmul may round the last bit unlike one head's [Q, K] one
            np.testing.assert_allclose(steps.arrays["weights"], forward_maps[kind_key(kind, layer)][head], rtol=0,
                                       atol=1e-6)


def test_the_step_view_puts_no_hooks_on_the_shared_model(runs, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the service registered a hook")

    for name in ("register_forward_pre_hook", "register_forward_hook"):
        monkeypatch.setattr(torch.nn.Module, name, refuse)
    settings = runs.settings("no hooks", "reverse/sqrt_dk", 16, pad_tokens=1)
    for kind in KINDS:
        assert runs.steps(settings, kind, 1, 0).arrays["weights"].shape == runs.run(settings).head(kind, 1, 0).shape


def test_steps_ignore_other_threads_using_the_same_model(runs):
    """The step view runs the shared model; a forward pass running in another thread must not leak into it."""
    settings = runs.settings("threads", "reverse/sqrt_dk", 16)
    expected = runs.steps(settings, "encoder.self_attn", 0, 0).arrays["weights"]
    stop = threading.Event()

    other = runs.run(runs.settings("zzzzzzzzzzzzzzzzzz", "reverse/sqrt_dk", 16))

    def busy():
        while not stop.is_set():
            runs.teacher_forced_maps(other, settings)

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        for _ in range(20):
            weights = runs.steps(settings, "encoder.self_attn", 0, 0).arrays["weights"]
            np.testing.assert_array_equal(weights, expected)
    finally:
        stop.set()
        worker.join()


def test_compare_scaling_on_the_same_input(runs):
    settings = runs.settings("compare", "reverse/sqrt_dk", 64, "custom", 0.3)
    c = runs.compare(settings, "scaling", "decoder.cross_attn", 0, 1)
    scaled = runs.run(runs.settings("compare", "reverse/sqrt_dk", 64, "sqrt_dk"))
    np.testing.assert_allclose(c.a, runs.teacher_forced_maps(runs.run(settings), scaled.settings)
                               ["decoder.0.cross_attn"][1], atol=1e-6)
    assert c.a.shape == c.b.shape and np.abs(c.difference).max() > 0
    unscaled = runs.run(runs.settings("compare", "reverse/sqrt_dk", 64, "none"))
    assert c.outputs == (scaled.output, unscaled.output)


def test_compare_masks(runs):
    settings = runs.settings("masks", UNTRAINED, 16, pad_tokens=2)
    assert np.abs(runs.compare(settings, "causal_mask", "encoder.self_attn", 0, 0).difference).max() == 0
    causal = runs.compare(settings, "causal_mask", "decoder.self_attn", 0, 0)
    assert (np.triu(causal.a, 1) == 0).all() and np.triu(causal.b, 1).sum() > 0
    padding = runs.compare(settings, "padding_mask", "encoder.self_attn", 1, 1)
    assert (padding.a[:, -2:] == 0).all() and (padding.b[:, -2:] > 0).all()
    with pytest.raises(ValueError, match="comparison must be one of"):
        runs.compare(settings, "dropout", "encoder.self_attn", 0, 0)


# ------------------------------------------------------------------------------ exports


def test_npz_export_loads_without_pickle(runs):
    run = runs.run(runs.settings("export", "reverse/sqrt_dk", 16, pad_tokens=1))
    data = np.load(io.BytesIO(maps_npz(run)), allow_pickle=False)
    for key, value in run.maps.items():
        np.testing.assert_array_equal(data[key], value)
    assert tuple(data["src_tokens"]) == run.src_tokens and tuple(data["tgt_tokens"]) == run.tgt_tokens
    assert json.loads(str(data["settings"]))["checkpoint"] == "reverse_dk16_sqrt_dk"


def test_csv_export_of_one_head(runs):
    run = runs.run(runs.settings("a,b=c", UNTRAINED, 16))
    text = head_csv(run, "decoder.cross_attn", 1, 2, {"model": "untrained", "text": "a,b=c"})
    assert text.startswith("# model: untrained\n# text: a,b=c\n")
    rows = list(csv.reader(io.StringIO(text), delimiter=","))[2:]
    queries, keys = run.tokens("decoder.cross_attn")
    assert rows[0] == ["query \\ key"] + [f"{j}:{t}" for j, t in enumerate(keys)]
    assert [row[0] for row in rows[1:]] == [f"{i}:{t}" for i, t in enumerate(queries)]
    values = np.array([[float(v) for v in row[1:]] for row in rows[1:]])
    np.testing.assert_allclose(values, run.head("decoder.cross_attn", 1, 2), atol=1e-6)


def test_a_settings_line_of_the_csv_stays_one_line_whatever_the_text_holds(runs):
    run = runs.run(runs.settings("abc", UNTRAINED, 16))
    breaks = "a\u2028b\u2029c\nd\re\x85f\x0bg\x1ch"  # every one ends a line for str.splitlines
    text = head_csv(run, "encoder.self_attn", 0, 0, {"text": breaks, "model": "untrained"})
    lines = text.splitlines()
    assert lines[0] == "# text: a\\u2028b\\u2029c\\nd\\re\\x85f\\x0bg\\x1ch" and lines[1] == "# model: untrained"
    assert lines[2].startswith("query \\ key") and len(lines) == 3 + len(run.tokens("encoder.self_attn")[0])


@pytest.mark.parametrize("weights, error_type, message", [
    (b"\x80\x04 not a safetensors file, maybe a pickle", UnsafeCheckpointError,
     "The model 'copy_dk16_none' was refused: its weights are not a safetensors file."),
    (None, ValueError, "The model 'copy_dk16_none' could not be loaded; its checkpoint may be damaged."),
])
def test_a_damaged_checkpoint_is_refused_without_naming_server_paths(models_dir, tmp_path, one_thread, weights,
                                                                    error_type, message):
    for suffix in (".json", ".safetensors"):
        (tmp_path / f"copy_dk16_none{suffix}").write_bytes((models_dir / f"copy_dk16_none{suffix}").read_bytes())
    if weights is None:  # a valid safetensors file of another model: the card's config does not describe it
        weights = (models_dir / "reverse_dk64_sqrt_dk.safetensors").read_bytes()
    (tmp_path / "copy_dk16_none.safetensors").write_bytes(weights)
    runs = Runs(tmp_path)
    with pytest.raises(error_type) as error:
        runs.run(runs.settings("abc", "copy/none", 16))
    assert str(error.value) == message
