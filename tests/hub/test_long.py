"""The long pass (hub.long) keeps what recomputes every map, and what it recomputes is the map.

In float64: its summaries equal the same statistics of every full map, its regions equal the map's cells and its
overviews the map's block max and block mean, its output equals forward's logits; against transformers' own eager
attention (GPT-2, BERT) and against forward's maps under the same switches (Llama-class, whose eager attention
takes its softmax in float32; scale none, causal mask off, heads off by zero and by mean, a sliding window, a padded
key). Regions and overviews come back in float32, so they are compared to float32's rounding.
"""

from __future__ import annotations


import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from attention_viz.core.ablation import mean_outputs  # noqa: E402
from attention_viz.hub import PretrainedTransformer, load_pretrained  # noqa: E402
from attention_viz.fast.blockwise import STATISTICS  # noqa: E402
from attention_viz.hub.long import LongRunError  # noqa: E402
from attention_viz.hub.loading import model_class  # noqa: E402

F32 = dict(rtol=0, atol=2e-7)  # float32 rounding of weights <= 1


class Ids:
    """All the wrapper needs of a tokenizer when the test gives ids: its pad id (None: no padding)."""

    eos_token_id = None

    def __init__(self, pad: int | None = None) -> None:
        self.pad_token_id = pad

    def convert_ids_to_tokens(self, ids):
        return [str(i) for i in ids]


def tiny_llama(pad: int | None = None, **overrides) -> PretrainedTransformer:
    """A Llama-class model (4 query heads over 2 key/value heads, rotary), random weights, float64."""
    config = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512) | overrides
    cls = transformers.MistralForCausalLM if "sliding_window" in overrides else transformers.LlamaForCausalLM
    config_cls = transformers.MistralConfig if "sliding_window" in overrides else transformers.LlamaConfig
    torch.manual_seed(0)
    model = cls(config_cls(**config)).double()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.3)  # wider than the default: sharper maps, larger distances between heads
    return PretrainedTransformer(model, Ids(pad))


def statistics(maps: torch.Tensor) -> dict[str, np.ndarray]:
    """Each head's statistics of its full map [H, T, T], by their definitions (hub.long's docstring)."""
    H, T, _ = maps.shape
    i = torch.arange(T)
    previous = torch.zeros(H, T, dtype=maps.dtype)
    previous[:, 1:] = maps[:, i[1:], i[1:] - 1]
    rows = {
        "entropy": -(maps * torch.where(maps > 0, maps.log(), 0.0)).sum(-1),
        "max_weight": maps.amax(-1),
        "mean_distance": (maps * (i[:, None] - i[None]).abs()).sum(-1),
        "first_token": maps[:, :, 0],
        "previous_token": previous,
        "self": maps[:, i, i],
    }
    return {name: row.mean(-1).numpy() for name, row in rows.items()}


def blocks(weights: torch.Tensor, size: int) -> tuple[np.ndarray, np.ndarray]:
    """A map [T, T]'s block max and block mean (cells inside the map only) for an overview of `size`."""
    T = weights.size(0)
    b = -(-T // size)
    G = -(-T // b)
    padded = torch.zeros(G * b, G * b, dtype=weights.dtype)
    padded[:T, :T] = weights
    sides = torch.full((G,), float(b), dtype=torch.float64)
    sides[-1] = T - (G - 1) * b
    grid = padded.view(G, b, G, b)
    return grid.amax(dim=(1, 3)).numpy(), (grid.sum(dim=(1, 3)) / (sides[:, None] * sides[None])).numpy()


def assert_long_equals(run, maps: dict[str, torch.Tensor], heads=(0, -1), size: int = 16) -> None:
    """run's summaries, regions and overviews against full maps {key: [1, H, T, T]} (float64)."""
    assert run.keys == list(maps)
    for key, full in maps.items():
        full = full[0].detach().double()
        reference = statistics(full)
        assert sorted(run.summaries[key]) == sorted(STATISTICS)
        for name in STATISTICS:
            np.testing.assert_allclose(run.summaries[key][name], reference[name], rtol=1e-9, atol=1e-12,
                                       err_msg=f"{key} {name}")
        T = full.size(-1)
        for head in heads:
            head = head % full.size(0)
            region = run.region(key, head, slice(T // 3, T // 3 + 40), slice(0, T))
            assert region.dtype == np.float32 and region.shape == (40, T)
            np.testing.assert_allclose(region, full[head, T // 3: T // 3 + 40].numpy(), **F32)
            block_max, block_mean = blocks(full[head], size)
            np.testing.assert_allclose(run.overview(key, head, size=size), block_max, **F32)
            np.testing.assert_allclose(run.overview(key, head, size=size, reduce="mean"), block_mean, **F32)


def eager(folder):
    """The folder loaded by transformers alone, in float64, with its own eager attention."""
    config = transformers.AutoConfig.from_pretrained(folder)
    return model_class(config).from_pretrained(folder, attn_implementation="eager", dtype=torch.float64).eval()


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_long_pass_equals_eager_attention(tiny_folder, family):
    """GPT-2 (causal) and BERT (every token sees every other): the long pass against transformers' eager maps."""
    folder = tiny_folder(family)
    ours = load_pretrained(folder, dtype=torch.float64, device="cpu")
    reference = eager(folder)
    ids = torch.randint(5, len(ours.tokenizer), (1, 150), generator=torch.Generator().manual_seed(1))
    run = ours.long_run(ids, rows=32)
    with torch.no_grad():
        out = reference(input_ids=ids, output_attentions=True)
    logits = out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state
    torch.testing.assert_close(run.logits, logits, rtol=1e-9, atol=1e-9)
    stack = "decoder" if family == "gpt2" else "encoder"
    assert_long_equals(run, {f"{stack}.{i}.self_attn": a for i, a in enumerate(out.attentions)})


@pytest.mark.parametrize("family", ["marian", "bart"])
def test_an_encoder_decoder_reads_the_page_with_its_encoder(tiny_folder, family):
    """Marian (sinusoidal positions) and BART (learned positions): the long pass reads the text with the encoder
    alone; every encoder layer's map against transformers' eager encoder, its last states as the run's output, the
    run saying what read the page; heads of the decoder's maps cannot be switched off in a read it has no part in."""
    from attention_viz.hub.long import READS_WITH_ENCODER

    folder = tiny_folder(family)
    ours = load_pretrained(folder, dtype=torch.float64, device="cpu")
    reference = eager(folder).get_encoder()
    ids = torch.randint(5, 50, (1, 70), generator=torch.Generator().manual_seed(7))
    run = ours.long_run(ids, rows=16)
    with torch.no_grad():
        out = reference(input_ids=ids, output_attentions=True)
    torch.testing.assert_close(run.logits, out.last_hidden_state, rtol=1e-9, atol=1e-9)
    assert run.reads == READS_WITH_ENCODER and "encoder" in run.reads
    assert_long_equals(run, {f"encoder.{i}.self_attn": a for i, a in enumerate(out.attentions)}, size=9)
    with pytest.raises(LongRunError, match="encoder.. maps only"):
        ours.long_run(ids, heads_off={"decoder.0.self_attn": [0]})
    assert ours.model.config._attn_implementation == "attention_viz"  # the model's own implementation is back
    assert tiny_llama().long_run(torch.randint(0, 64, (1, 9))).reads == ""


def test_long_pass_of_grouped_query_attention_equals_forward():
    """Llama-class (rotary, 4 query heads on 2 key/value heads), T = 203 (blocks of rows that do not divide it,
    overview blocks of 13 with a partial last one): what forward records and gives."""
    model = tiny_llama()
    ids = torch.randint(0, 64, (1, 203), generator=torch.Generator().manual_seed(2))
    logits, maps = model.forward(ids)
    run = model.long_run(ids, rows=48)
    torch.testing.assert_close(run.logits, logits, rtol=1e-10, atol=1e-10)
    assert_long_equals(run, dict(maps.items()), heads=range(4))
    assert run.kept_bytes == 2 * (203 * 32 + 203 * 16 + 4 * 203) * 8  # q [4, T, 8], k [2, T, 8], lse [4, T]


@pytest.mark.parametrize("switches", [
    {"scale": "none"},
    {"scale": 0.5},
    {"causal_mask": False},
    {"heads_off": {"decoder.0.self_attn": [1, 2]}},
    {"heads_off": {"decoder.0.self_attn": [3]}, "ablation": "mean"},
], ids=["scale-none", "scale-0.5", "causal-off", "heads-off-zero", "heads-off-mean"])
def test_switches_equal_forward_under_the_same_switches(switches):
    """Every switch of forward, through the long pass: the same logits and maps as forward's."""
    model = tiny_llama()
    ids = torch.randint(0, 64, (1, 90), generator=torch.Generator().manual_seed(3))
    means = None
    if switches.get("ablation") == "mean":
        means = mean_outputs(model.head_outputs(ids))
    logits, maps = model.forward(ids, head_means=means, **switches)
    plain, _ = model.forward(ids)
    if switches.get("heads_off") or switches.get("scale"):
        assert not torch.allclose(logits, plain)  # the switch changes the output: the comparison below can fail
    run = model.long_run(ids, head_means=means, **switches)
    torch.testing.assert_close(run.logits, logits, rtol=1e-10, atol=1e-10)
    assert_long_equals(run, dict(maps.items()))


def test_sliding_window_and_padded_keys_equal_forward():
    """A mask that is neither causal nor full (Mistral's sliding window; a <pad> key, the first one, so row 0 has no
    key at all): kept as the mask, and still exact (a row with every key hidden is 0, as forward records it)."""
    for model, ids in [(tiny_llama(sliding_window=17), torch.randint(1, 64, (1, 80))),
                       (tiny_llama(pad=0), torch.tensor([[0, *range(1, 40), 0, *range(41, 64)]]))]:
        logits, maps = model.forward(ids)
        run = model.long_run(ids, rows=16)
        torch.testing.assert_close(run.logits[:, 1:], logits[:, 1:], rtol=1e-10, atol=1e-10)
        assert_long_equals(run, dict(maps.items()))


@pytest.mark.parametrize("rule", ["causal", "full", "mask"])
def test_attend_in_float32_is_the_float64_softmax_to_float32_rounding(rule):
    """attend itself in float32 (as the benchmark's model runs; every other test runs float64), scores of several
    units so a hidden cell's stand-in score (the lowest float32) meets large maxima: output, lse and statistics equal
    the float64 softmax of the same scores, a row with every key hidden (rule "mask") 0 with lse +inf."""
    from attention_viz.fast.blockwise import attend

    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(shape, generator=g, dtype=torch.float64) * 3  # (H, T, d), (H_kv, T, d), (H_kv, T, d)
               for shape in [(4, 37, 8), (2, 37, 8), (2, 37, 8)])
    allowed = {"causal": torch.ones(37, 37, dtype=torch.bool).tril(), "full": torch.ones(37, 37, dtype=torch.bool),
               "mask": torch.rand(37, 37, generator=g) < 0.6}[rule]
    if rule == "mask":
        allowed[5] = False  # row 5 sees nothing
    output, lse, sums = attend(q.float(), k.float(), v.float(), 0.5, rule, allowed if rule == "mask" else None, rows=8)
    scores = (q @ k.repeat_interleave(2, 0).transpose(1, 2) * 0.5).masked_fill(~allowed, float("-inf"))  # (H, T, T)
    maps = torch.softmax(scores, -1).nan_to_num(0.0)  # a row with every key hidden: 0
    torch.testing.assert_close(output.double(), (maps @ v.repeat_interleave(2, 0)).transpose(0, 1), rtol=0, atol=2e-5)
    torch.testing.assert_close(lse.double(), torch.logsumexp(scores, -1).masked_fill(~allowed.any(-1), float("inf")),
                               rtol=0, atol=2e-5)
    for name, value in statistics(maps).items():
        np.testing.assert_allclose(sums[name].numpy() / 37, value, rtol=2e-5, atol=2e-6, err_msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("rule", ["causal", "full", "mask"])
def test_attend_on_the_pipelines_stages_gives_the_numbers_it_gave_before_bit_for_bit(rule, dtype):
    """attend, its scale and mask run by core.attention's stage functions, against its own code from before
    (tests/hub/blockwise_before.py): output, lse and every statistic bit for bit, over grouped heads, blocks that
    do not divide the rows, more keys than rows, a row with every key hidden, factors of 1 and ln 2 (log₂e·factor
    exactly 1)."""
    from attention_viz.fast.blockwise import attend

    from tests.blockwise_before import attend as attend_before

    g = torch.Generator().manual_seed(7)
    for H, H_kv, T, K, rows, factor in [(4, 2, 37, 37, 8, 0.5), (3, 3, 21, 21, 64, 1.0), (6, 2, 19, 19, 5, 0.125),
                                        (2, 1, 13, 13, 4, 1 / 1.4426950408889634)]:
        q, k, v = (torch.randn(shape, generator=g, dtype=torch.float64).to(dtype) * 2
                   for shape in [(H, T, 8), (H_kv, K, 8), (H_kv, K, 8)])
        allowed = torch.rand(T, K, generator=g) < 0.6 if rule == "mask" else None
        if allowed is not None:
            allowed[3] = False  # row 3 sees nothing
        now, before = attend(q, k, v, factor, rule, allowed, rows), attend_before(q, k, v, factor, rule, allowed, rows)
        assert torch.equal(now[0], before[0]) and torch.equal(now[1], before[1])
        assert all(torch.equal(now[2][name], before[2][name]) for name in STATISTICS)


@pytest.mark.parametrize("rule", ["causal", "full", "mask"])
def test_attend_makes_every_tensor_on_the_device_of_q(rule):
    """attend on another device than the CPU: every tensor it takes, makes or gives is on q's (the meta device
    stands in for a GPU; an operand made on the CPU by default, as torch.arange(K) is, would show up here)."""
    from torch.overrides import TorchFunctionMode

    from attention_viz.fast.blockwise import attend

    devices = set()

    class Devices(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            for value in torch.utils._pytree.tree_leaves((args, kwargs, result)):
                if isinstance(value, torch.Tensor):
                    devices.add(value.device.type)
            return result

    q, k, v = (torch.empty(shape, device="meta") for shape in [(4, 37, 8), (2, 37, 8), (2, 37, 8)])
    allowed = torch.empty(37, 37, dtype=torch.bool, device="meta") if rule == "mask" else None
    with Devices():
        output, lse, sums = attend(q, k, v, 0.5, rule, allowed, rows=8)
    assert devices == {"meta"}
    assert output.shape == (37, 4, 8) and lse.shape == (4, 37) and all(s.shape == (4,) for s in sums.values())


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
def test_on_a_cuda_gpu_the_long_pass_equals_the_cpus():
    """The long pass on a GPU (a grouped-query model, a sliding window): the CPU's logits, summaries and views."""
    for overrides in ({}, {"sliding_window": 17}):
        cpu = tiny_llama(**overrides)
        gpu = tiny_llama(**overrides)
        gpu.model.cuda()
        ids = torch.randint(0, 64, (1, 150), generator=torch.Generator().manual_seed(7))
        on_cpu, on_gpu = cpu.long_run(ids, rows=32), gpu.long_run(ids.cuda(), rows=32)
        torch.testing.assert_close(on_gpu.logits.cpu(), on_cpu.logits, rtol=1e-9, atol=1e-9)
        for key in on_cpu.keys:
            for name in STATISTICS:
                np.testing.assert_allclose(on_gpu.summaries[key][name], on_cpu.summaries[key][name], rtol=1e-9,
                                           atol=1e-12)
            np.testing.assert_allclose(on_gpu.overview(key, 3, size=16), on_cpu.overview(key, 3, size=16), **F32)
            np.testing.assert_allclose(on_gpu.region(key, 1, slice(90, 150), slice(0, 150)),
                                       on_cpu.region(key, 1, slice(90, 150), slice(0, 150)), **F32)


def test_kept_in_memory_or_on_disk_give_the_same_views():
    model = tiny_llama()
    ids = torch.randint(0, 64, (1, 70), generator=torch.Generator().manual_seed(4))
    disk, memory = model.long_run(ids), model.long_run(ids, keep="memory")
    for key in disk.keys:
        for name in STATISTICS:
            np.testing.assert_array_equal(disk.summaries[key][name], memory.summaries[key][name])
        np.testing.assert_array_equal(disk.overview(key, 3, size=8), memory.overview(key, 3, size=8))
        np.testing.assert_array_equal(disk.region(key, 1, slice(5, 60), slice(0, 70)),
                                      memory.region(key, 1, slice(5, 60), slice(0, 70)))
    disk.close()
    assert model.model.config._attn_implementation == "attention_viz"  # the model's own implementation is back


def test_a_float32_models_recomputed_weights_never_pass_1():
    """A float32 model with sharp heads: the first row of a causal map is one weight of exactly 1, which the
    recomputation from kept q, k and lse (the pass's base-2 sum) once put at 1.0000153; every region and overview
    cell stays <= 1, the sharp rows at 1 within float32's rounding."""
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    torch.manual_seed(0)
    network = transformers.LlamaForCausalLM(config)  # float32
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.normal_(0, 1.0)  # scores of tens: rounding of lse shows in exp(s - lse)
    run = PretrainedTransformer(network, Ids()).long_run(torch.randint(0, 64, (300,)).tolist())
    tops = []
    for key in run.keys:
        for head in range(run.n_heads):
            for reduce in ("max", "mean"):
                assert run.overview(key, head, size=64, reduce=reduce).max() <= 1.0
            region = run.region(key, head, slice(0, 200), slice(0, 200))
            assert region.max() <= 1.0 and run.region(key, head, slice(0, 1), slice(0, 1))[0, 0] >= 1 - 1e-5
            tops.append(float(region.max()))
    assert max(tops) == 1.0  # sharp rows reach the top


def test_refusals_say_what_is_wrong(tiny_folder):
    model = tiny_llama()
    ids = torch.randint(0, 64, (1, 40))
    run = model.long_run(ids)
    key = run.keys[0]
    for call, words in [
        (lambda: run.region("decoder.9.self_attn", 0, slice(0, 4), slice(0, 4)), "no map"),
        (lambda: run.region(key, 4, slice(0, 4), slice(0, 4)), "heads 0 to 3"),
        (lambda: run.region(key, 0, slice(0, 40, 2), slice(0, 4)), "step 1"),
        (lambda: run.region(key, 0, slice(50, 60), slice(0, 4)), "no position"),
        (lambda: run.overview(key, 0, size=0), "positive"),
        (lambda: run.overview(key, 0, reduce="median"), "reduce"),
        (lambda: model.long_run(torch.randint(0, 64, (2, 10))), "one text"),
        (lambda: model.long_run(ids, keep="cloud"), "keep"),
        (lambda: model.long_run(ids, heads_off={key: [0]}, ablation="mean"), "head_means"),
    ]:
        with pytest.raises(ValueError, match=words):
            call()
    big = tiny_llama().long_run(torch.randint(0, 64, (1, 300)))
    with pytest.raises(LongRunError, match="at most 256"):
        big.region(big.keys[0], 0, slice(0, 300), slice(0, 10))


def test_a_long_pass_leaves_the_model_as_it_is():
    """The model keeps its implementation, ours, during a long pass and after it, and another thread's forward in
    the middle of one is forward's own, bit for bit: the pass lives in its caller's context, never on the model."""
    import threading

    model = tiny_llama()
    ids = torch.randint(0, 64, (1, 30), generator=torch.Generator().manual_seed(5))
    logits, maps = model.forward(ids, scale="none")
    during = []

    def meanwhile(module, args, output):  # inside the long pass's first layer
        if not during:
            during.append(model.model.config._attn_implementation)
            thread = threading.Thread(target=lambda: during.append(model.forward(ids, scale="none")))
            thread.start()
            thread.join()

    handle = model.model.model.layers[0].register_forward_hook(meanwhile)
    try:
        run = model.long_run(ids)
    finally:
        handle.remove()
    assert during[0] == "attention_viz" == model.model.config._attn_implementation and run.summaries
    switched_logits, switched_maps = during[1]
    torch.testing.assert_close(switched_logits, logits, rtol=0, atol=0)
    for key, weights in maps.items():
        torch.testing.assert_close(switched_maps[key], weights, rtol=0, atol=0)


def test_the_benchmark_checks_times_and_reports_on_a_small_model():
    """benchmarks/long.py's harness end to end on a 2-layer model of its shape's kind (no timing asserted)."""
    from benchmarks.long import build, check, report, timings

    model = build(num_hidden_layers=2, hidden_size=64, intermediate_size=96, num_attention_heads=4,
                  num_key_value_heads=2)
    result = {"threads": 1, "load_before": [0], "load_after": [0], "check_max_abs_logits": check(model, 24),
              "time": timings(model, (40,), rounds=1)}
    assert set(result["time"][0]) >= {"sdpa", "long", "eager", "ours", "views", "kept_bytes"}
    text = report(result)
    assert "| 40 " in text and "overview 512, max" in text
