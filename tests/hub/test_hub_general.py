"""The general path: any model whose attention goes through transformers' attention interface runs with our Eq. 1
inside, proven on load against its own eager attention. What the probe discovers (map keys, layout, W_O) equals
what the old per-family tables said; architectures beyond them (Gemma 2's soft cap and sliding window, Qwen3's q/k
norms, Phi-3, RoBERTa, gpt-oss's sinks and experts, OPT, GPT-NeoX, DeepSeek-V3's latent attention with values
narrower than its queries) are proven; what Eq. 1 would not honour (LongT5's transient-global attention outside the
interface, shared layers, an unknown argument, a model that disagrees with its eager attention) is refused by name.
The tiny models are built here from their configs (hidden 32, 2 layers, 4 heads, vocabulary 128)."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
import transformers  # noqa: E402

from attention_viz.core.attention import scaled_dot_product_attention as reference_attention  # noqa: E402
from attention_viz.hub import PretrainedTransformer, UnsupportedModelError, load_pretrained  # noqa: E402
from attention_viz.hub import attention as hub_attention  # noqa: E402
from attention_viz.hub import families  # noqa: E402
from attention_viz.hub.loading import model_class  # noqa: E402
from attention_viz.hub.proof import TOLERANCE  # noqa: E402
from attention_viz.importance.real import output_head  # noqa: E402

SMALL = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)


class Pieces:
    """What the wrapper asks a tokenizer for, here: its special ids."""

    pad_token_id, eos_token_id = 0, 1

    def convert_ids_to_tokens(self, ids):
        return [str(i) for i in ids]


def tiny(kind: str, dtype=torch.float32):
    """A transformers model of this kind with random weights (seed 0), in eval mode."""
    torch.manual_seed(0)
    build = {
        "gemma2": lambda: transformers.Gemma2ForCausalLM(transformers.Gemma2Config(
            num_key_value_heads=2, head_dim=8, sliding_window=4, attn_logit_softcapping=2.0, query_pre_attn_scalar=8,
            **SMALL)),
        "qwen3": lambda: transformers.Qwen3ForCausalLM(transformers.Qwen3Config(num_key_value_heads=2, head_dim=8,
                                                                                **SMALL)),
        "phi3": lambda: transformers.Phi3ForCausalLM(transformers.Phi3Config(num_key_value_heads=2, pad_token_id=0,
                                                                             eos_token_id=1, bos_token_id=1, **SMALL)),
        "roberta": lambda: transformers.RobertaForMaskedLM(transformers.RobertaConfig(max_position_embeddings=64,
                                                                                      **SMALL)),
        "gpt_oss": lambda: transformers.GptOssForCausalLM(transformers.GptOssConfig(
            num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
            **SMALL)),
        "opt": lambda: transformers.OPTForCausalLM(transformers.OPTConfig(
            vocab_size=128, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4,
            word_embed_proj_dim=32)),
        "gpt_neox": lambda: transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**SMALL)),
        "deepseek_v3": lambda: transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(
            moe_intermediate_size=16, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, n_group=1,
            topk_group=1, kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=6,
            first_k_dense_replace=1, **SMALL)),
        "albert": lambda: transformers.AlbertForMaskedLM(transformers.AlbertConfig(embedding_size=16, **SMALL)),
        "longt5": lambda: transformers.LongT5ForConditionalGeneration(transformers.LongT5Config(
            vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, local_radius=2)),
    }[kind]
    return build().to(dtype).eval()


# ----------------------------------------------------------------------------- discovery equals the old tables

# The per-family tables the discovery replaced: a pattern on the module's name -> (stack, name), and W_O's path from
# the attention module ("../x": a sibling's child) with whether its weight is [in, out].
OLD_KEYS = {
    "encoder-decoder": ((r"encoder\.layers\.(\d+)\.self_attn", "encoder", "self_attn"),
                        (r"decoder\.layers\.(\d+)\.self_attn", "decoder", "self_attn"),
                        (r"decoder\.layers\.(\d+)\.encoder_attn", "decoder", "cross_attn")),
    "bert": ((r"encoder\.layer\.(\d+)\.attention\.self", "encoder", "self_attn"),),
    "gpt2": ((r"h\.(\d+)\.attn", "decoder", "self_attn"),),
    "llama": ((r"layers\.(\d+)\.self_attn", "decoder", "self_attn"),),
}
OLD_W_O = {"bert": ("../output.dense", False), "gpt2": ("c_proj", True), "llama": ("o_proj", False),
           "encoder-decoder": ("out_proj", False)}
TABLE = {"marian": "encoder-decoder", "bart": "encoder-decoder", "mbart": "encoder-decoder", "bert": "bert",
         "gpt2": "gpt2", "llama": "llama", "qwen2": "llama"}


def old_keys(model, table: str) -> dict[str, str]:
    """Module name -> map key by the old regexes."""
    found = {}
    for name, _ in model.named_modules():
        for pattern, stack, kind in OLD_KEYS[table]:
            match = re.search(rf"(?:^|\.){pattern}$", name)
            if match:
                found[name] = f"{stack}.{int(match.group(1))}.{kind}"
    return found


@pytest.mark.parametrize("family", list(TABLE))
def test_discovered_keys_and_w_o_equal_the_old_tables(tiny_folders, family):
    model = load_pretrained(tiny_folders[family])
    assert dict(model.family.keys) == old_keys(model.model, TABLE[family])
    path, transposed = OLD_W_O[TABLE[family]]
    modules = dict(model.model.named_modules())
    for module_name, key in model.family.keys:
        attention = modules[module_name]
        if path.startswith("../"):
            parent = module_name.rsplit(".", 1)[0]
            expected = modules[f"{parent}.{path[3:]}"]
        else:
            expected = attention.get_submodule(path)
        assert model._w_o[key] == (expected, transposed)
        w_o = expected.weight.T if transposed else expected.weight
        assert model.w_o(key) is not None and torch.equal(model.w_o(key), w_o)


def test_the_layout_and_the_shape_come_from_the_probe(tiny_folders):
    layouts = {family: load_pretrained(tiny_folders[family]).layout for family in ("marian", "bert", "gpt2")}
    assert layouts == {"marian": "encoder-decoder", "bert": "encoder", "gpt2": "decoder"}
    llama = load_pretrained(tiny_folders["llama"])
    assert (llama.n_heads, llama.d_k) == (llama.model.config.num_attention_heads, llama.model.config.head_dim)


# ----------------------------------------------------------------------------- the proof on load

@pytest.mark.parametrize("family", ["marian", "bert", "gpt2", "llama"])
def test_the_fidelity_is_recorded_on_load(tiny_folders, family):
    model = load_pretrained(tiny_folders[family])
    fidelity = model.fidelity
    assert fidelity.proven and fidelity.dtype == "float32" and fidelity.tolerance == TOLERANCE[torch.float32]
    assert 0 <= fidelity.maps <= 1e-6 and 0 <= fidelity.outputs <= 1e-6
    assert fidelity.kinds == tuple(model.kinds) and fidelity.rows == 2 and fidelity.tokens == 8
    assert fidelity.output == ("hidden states" if family == "bert" and not model.abilities.fills_masks else "logits")
    text = str(fidelity)
    assert text.startswith("proven on load: maps within ") and "of transformers' eager attention (float32, " in text
    with pytest.raises(AttributeError):
        fidelity.maps = 1.0  # frozen: the figures travel with the model as they were measured


def test_a_model_that_disagrees_with_its_eager_attention_is_refused_with_the_figures(tiny_folders, monkeypatch):
    import transformers.models.gpt2.modeling_gpt2 as gpt2

    own = gpt2.eager_attention_forward

    def skewed(*args, **kwargs):  # eager attention, its weights and output off by a little
        output, weights = own(*args, **kwargs)
        return output * 1.01, weights * 1.001

    monkeypatch.setattr(gpt2, "eager_attention_forward", skewed)
    with pytest.raises(UnsupportedModelError) as refused:
        load_pretrained(tiny_folders["gpt2"])
    message = str(refused.value)
    assert "does not reproduce its own eager attention: maps within " in message, message
    assert "beyond the tolerance 1e-04" in message
    figure = float(re.search(r"maps within ([0-9.e+-]+)", message).group(1))
    assert figure > TOLERANCE[torch.float32]


def test_whatever_a_models_own_code_raises_on_the_probe_is_a_refusal_naming_it(monkeypatch):
    model = tiny("qwen3")
    layer = model.model.layers[1].mlp

    def broken(*args, **kwargs):
        raise AttributeError("'Qwen3MLP' object has no attribute 'gate'")

    monkeypatch.setattr(layer, "forward", broken)
    with pytest.raises(UnsupportedModelError, match=r"could not be probed: its forward pass raised AttributeError "
                                                    r"\('Qwen3MLP' object has no attribute 'gate'\)"):
        PretrainedTransformer(model, Pieces())


def test_a_model_whose_output_has_neither_logits_nor_hidden_states_is_refused():
    model = transformers.DPRQuestionEncoder(transformers.DPRConfig(max_position_embeddings=64, **SMALL)).eval()
    with pytest.raises(UnsupportedModelError, match="neither logits nor last hidden states"):
        PretrainedTransformer(model, Pieces())


def test_the_reference_kernel_and_the_fast_one_record_the_same_maps(tiny_folders):
    model = load_pretrained(tiny_folders["llama"])
    ids = torch.tensor([[1, 5, 9, 11, 7, 3]])
    fast_logits, fast_maps = model.forward(ids)
    logits, maps = model.use_kernel(reference_attention).forward(ids)
    assert torch.equal(fast_logits, logits) and all(torch.equal(fast_maps[k], maps[k]) for k in maps)


# ----------------------------------------------------------------------------- architectures beyond the old list

@pytest.mark.parametrize("kind, layout, honoured", [
    ("gemma2", "decoder", ("softcap",)), ("qwen3", "decoder", ()), ("phi3", "decoder", ()),
    ("roberta", "encoder", ()), ("gpt_oss", "decoder", ("s_aux",)), ("opt", "decoder", ()),
    ("gpt_neox", "decoder", ()), ("deepseek_v3", "decoder", ()),
])
def test_an_architecture_beyond_the_old_list_is_proven_on_load(kind, layout, honoured):
    model = PretrainedTransformer(tiny(kind), Pieces())
    assert model.fidelity.proven and model.fidelity.maps <= 1e-6 and model.fidelity.outputs <= 1e-6
    assert model.layout == layout and model.fidelity.honoured == honoured
    assert model.map_keys == [f"{'decoder' if layout == 'decoder' else 'encoder'}.{i}.self_attn" for i in range(2)]
    assert len(model.family.w_o) == 2 and model.n_heads == 4
    d_v = model.model.config.v_head_dim if kind == "deepseek_v3" else model.d_k  # latent attention: v narrower
    assert all(model.w_o(key).shape[1] == 4 * d_v for key in model.map_keys)
    ids = torch.tensor([[3, 5, 9, 11, 7, 2, 4, 6, 8, 10]])
    _, maps = model.forward(ids, attention_mask=torch.ones_like(ids))
    flows = model.value_flows(ids, attention_mask=torch.ones_like(ids))
    assert set(flows) == set(maps.keys()) and all(f.shape == maps[k].shape for k, f in flows.items())


def test_gemma2s_sliding_window_and_soft_cap_and_its_scaling_switched_off():
    """Scaling off in a soft-capped model: the cap stays, its argument loses 1/√d_k: c·tanh(q·k / c). The sliding
    window of 4 hides every key more than 3 back."""
    model = PretrainedTransformer(tiny("gemma2"), Pieces())
    ids = torch.tensor([[3, 5, 9, 11, 7, 2, 4, 6, 8, 10]])
    key = "decoder.0.self_attn"
    for scale in ("sqrt_dk", "none"):
        recorded = model.traced(ids, attention_mask=torch.ones_like(ids), variation=model_variation(scale),
                                keep=("q", "k"), at=(key,))
        q, k = recorded.kept[key]["q"], recorded.kept[key]["k"]  # (1, H, T, d)
        factor = recorded.run.factors[key] if scale == "sqrt_dk" else 1.0
        cap = model.model.config.attn_logit_softcapping
        logits = cap * torch.tanh(q @ k.transpose(-2, -1) * factor / cap)
        T = ids.size(1)
        allowed = torch.ones(T, T, dtype=torch.bool).tril() & ~torch.ones(T, T, dtype=torch.bool).tril(-4)
        expected = torch.softmax(logits.masked_fill(~allowed, float("-inf")), dim=-1)
        torch.testing.assert_close(recorded.maps[key], expected, atol=1e-6, rtol=1e-5)
        assert not recorded.maps[key][0, :, T - 1, : T - 4].any()  # outside the window: exactly 0
    assert output_head(model) is None  # final_logit_softcapping: the logits are not lm_head(h)


def test_opts_q_scaled_before_the_attention_function_is_undone_by_the_scale_switch():
    """OPT puts 1/√d_k on q itself and hands the function a factor of 1: the probe finds that factor (c_q), the
    steps' q and k are its projections' own (q_proj(x)), its factor on QKᵀ is 1/√d_k, and scale="none" equals
    transformers' own way (every module's `scaling` set to 1, eager attention)."""
    model = PretrainedTransformer(tiny("opt"), Pieces())
    d_k = model.d_k
    assert all(c == pytest.approx((d_k ** -0.5, 1.0)) for c in model._prescaled.values()) and model._prescaled
    ids = torch.tensor([[3, 5, 9, 11, 7, 2, 4, 6]])
    key, module = "decoder.0.self_attn", model.model.model.decoder.layers[0].self_attn
    seen = []
    handle = module.q_proj.register_forward_hook(lambda m, args, out: seen.append(out))
    recorded = model.traced(ids, attention_mask=torch.ones_like(ids), variation=model_variation("none"),
                            keep=("q", "k"), at=(key,))
    handle.remove()
    q = seen[0].view(1, ids.size(1), 4, d_k).transpose(1, 2)  # (1, H, T, d): q_proj(x), before OPT's factor
    torch.testing.assert_close(recorded.kept[key]["q"], q)
    assert recorded.run.factors[key] == pytest.approx(d_k ** -0.5)
    causal = torch.ones(ids.size(1), ids.size(1), dtype=torch.bool).tril()
    logits = (q @ recorded.kept[key]["k"].transpose(-2, -1)).masked_fill(~causal, float("-inf"))
    torch.testing.assert_close(recorded.maps[key], torch.softmax(logits, -1), atol=1e-6, rtol=1e-5)
    for layer in model.model.model.decoder.layers:
        layer.self_attn.scaling = 1.0
    model.model.set_attn_implementation("eager")
    with torch.no_grad():
        eager = model.model(input_ids=ids, output_attentions=True)
    torch.testing.assert_close(recorded.maps[key], eager.attentions[0], atol=1e-6, rtol=1e-5)

    model = PretrainedTransformer(tiny("opt"), Pieces())  # the long pass takes OPT's factor out the same way
    for scale in ("none", 0.5):
        logits, maps = model.forward(ids, scale=scale)
        run = model.long_run(ids, scale=scale)
        torch.testing.assert_close(run.logits, logits, atol=1e-5, rtol=1e-5)
        for head in range(4):
            np.testing.assert_allclose(run.region(key, head, slice(0, 8), slice(0, 8)), maps[key][0, head].detach().numpy(),
                                       atol=1e-6, rtol=1e-5)


def model_variation(scale):
    from attention_viz.core.variation import Variation

    return Variation(scale=scale)


def test_gpt_oss_sinks_take_a_share_of_each_row_kept_beside_the_map():
    model = PretrainedTransformer(tiny("gpt_oss"), Pieces())
    ids = torch.tensor([[3, 5, 9, 11, 7, 2]])
    recorded = model.traced(ids, attention_mask=torch.ones_like(ids))
    for key in model.map_keys:
        weights, sink = recorded.maps[key], recorded.run.sinks[key]  # (1, H, T, T), (1, H, T)
        assert (sink > 0).all() and (weights.sum(-1) < 1).all()
        torch.testing.assert_close(weights.sum(-1) + sink, torch.ones_like(sink))
    assert str(model.fidelity).count("attention sinks") == 1


def test_roberta_fills_masks_and_its_head_is_not_a_single_linear_layer():
    model = PretrainedTransformer(tiny("roberta"), Pieces())
    assert model.abilities.fills_masks and not model.abilities.writes_text and model.linear_head is None


def test_marians_logits_are_proven_lm_head_plus_its_final_logits_bias(tiny_folders):
    model = load_pretrained(tiny_folders["marian"])
    assert model.linear_head == ("final_logits_bias",)
    assert load_pretrained(tiny_folders["gpt2"]).linear_head == ()


# ----------------------------------------------------------------------------- refusals, by name

def test_longt5s_local_attention_is_proven_and_its_transient_global_one_refused_naming_its_global_tokens():
    model = tiny("longt5")
    assert PretrainedTransformer(model, Pieces()).fidelity.proven  # its local attention, routed (hub.routes_local)
    model.config.encoder_attention_type = "transient-global"
    with pytest.raises(UnsupportedModelError, match="transient global token per block"):
        PretrainedTransformer(model, Pieces())


def test_an_argument_eq1_would_not_honour_is_refused_by_its_name():
    with pytest.raises(hub_attention.UnhonouredArgument, match="handed window_bias .*does not know"):
        hub_attention.check_arguments({"window_bias": torch.zeros(1), "sliding_window": 4, "softcap": None}, None)
    hub_attention.check_arguments({"sliding_window": 4, "is_causal": True, "softcap": 2.0}, None)
    additive = torch.zeros(1, 1, 2, 2)
    hub_attention.check_arguments({}, additive.masked_fill(torch.eye(2, dtype=torch.bool), torch.finfo().min))
    with pytest.raises(hub_attention.UnhonouredArgument, match="adds a bias to QKᵀ"):
        hub_attention.check_arguments({}, additive - torch.tensor([0.0, 1.5]))  # ALiBi-like slopes


def test_the_auto_class_follows_the_architectures_the_config_names():
    config = transformers.RobertaConfig(architectures=["RobertaForMaskedLM"])
    assert model_class(config) is transformers.AutoModelForMaskedLM
    assert model_class(transformers.BertConfig(architectures=["BertModel"])) is transformers.AutoModel
    assert model_class(transformers.BertConfig(architectures=["BertForSequenceClassification"])) is \
        transformers.AutoModel
    assert model_class(transformers.Gemma2Config()) is transformers.AutoModelForCausalLM
    assert model_class(transformers.RobertaConfig()) is transformers.AutoModelForMaskedLM
    assert model_class(transformers.MarianConfig()) is transformers.AutoModelForSeq2SeqLM
