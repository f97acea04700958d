"""Coverage of transformers' text architectures: each model type of its auto mappings, built tiny and offline
(devtools.tiny_archs), wrapped by attention_viz and checked by devtools.coverage against transformers' own eager
attention: every map and the output, scale="none" against `scaling` = 1 in every attention module, the causal mask
off against a 4D all-visible mask, heads off against W_O's columns zeroed by hand, the position bias off (T5's kin)
against its relative_attention_bias tables zeroed, greedy decoding against generate.

Each model type is its own test: a type that is not a text model is skipped with the reason; a refused one must
say why; one that attention_viz accepts must pass every check (a difference is a failure). Then at least REQUIRED
types must pass.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch

from attention_viz.hub import ModelRefusedError, PretrainedTransformer, load_pretrained
from devtools import coverage, tiny_archs

MODEL_TYPES = tiny_archs.model_types()  # the mappings' keys: no model class is imported to collect them
REQUIRED = 40
# Refused for a principled reason: their attention is not Eq. 1 on the q, k, v that transformers' attention
# interface is handed (or they have none). A wrapper may still accept one of them, provided it passes every check.
PRINCIPLED_REFUSALS = {
    # a bias added to QKᵀ that never reaches the attention function, or attention outside the interface
    "longt5": "transient-global attention: a global token per block of tokens among the keys",
    # a softmax that is not Eq. 1's
    "gemma2": "a tanh soft-cap on the logits",
    "vaultgemma": "a tanh soft-cap on the logits",
    "gpt_oss": "attention sinks (s_aux): an extra logit per head", "flint": "attention sinks",
    "granite_swa": "attention sinks", "granitemoe_swa": "attention sinks", "mimo_v2_flash": "attention sinks",
    "openai_privacy_filter": "attention sinks", "hy_v4": "top-k indexed sparse attention and sinks",
    "deepseek_v4": "compressed keys, sinks and a grouped W_O",
    # no attention at all
    "mamba": "a state-space model", "mamba2": "a state-space model", "falcon_mamba": "a state-space model",
    "rwkv": "a recurrent model", "xlstm": "a recurrent model", "fnet": "Fourier transforms",
    "reformer": "LSH attention: keys hashed into buckets",
}


@functools.cache
def result_of(model_type: str) -> coverage.Result:
    """devtools.coverage.check, once per model type for the whole module."""
    return coverage.check(model_type)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_an_accepted_architecture_equals_transformers_eager_attention(model_type):
    result = result_of(model_type)
    if result.result == "skipped":
        pytest.skip(f"not a text model: {result.reason}")
    if result.result == "not built":
        pytest.skip(f"no tiny model of {model_type} is built here: {result.reason}")
    if result.result == "unchecked":
        pytest.skip(f"{model_type} was accepted, but eager gives nothing to compare its maps with: {result.reason}")
    assert result.result != "error", result.reason
    if result.result == "refused":
        assert len(result.reason.split()) >= 4, f"{model_type} was refused without a reason: {result.reason!r}"
        return
    assert result.result == "passed", f"{model_type} was accepted but {result.reason} ({result.checks})"
    assert set(result.checks) == {"maps", "scale", "causal", "heads", "bias", "greedy"}
    assert not result.checks["maps"].startswith("n/a"), result.checks  # the one check every model has


def test_at_least_forty_architectures_pass():
    results = [result_of(model_type) for model_type in MODEL_TYPES]
    passed = sorted(r.model_type for r in results if r.result == "passed")
    assert len(passed) >= REQUIRED, f"{len(passed)} pass: {passed}"


@pytest.mark.parametrize("model_type, expected", [
    ("t5gemma", "passed"),  # its decoder starts with its decoder config's bos, as its own _shift_right starts it
    ("inkling_text", "passed"),  # its sliding-window layers' own heads, shrunk as its full layers' are
    ("inkling2_text", "no linear layer reads the output"),  # its sinks per query honoured, its depth attention its own
    ("doge", "a weight of each key's content"), ("pegasus_x", "learned global tokens that are not the text's"),
])
def test_a_refusal_names_what_the_model_does_not_a_limit_of_our_code(model_type, expected):
    result = result_of(model_type)
    assert (result.result if expected == "passed" else result.reason).find(expected) >= 0, result


def test_principled_refusals_name_text_architectures_this_module_builds():
    built = {arch.model_type for arch in tiny_archs.text_architectures()}
    assert set(PRINCIPLED_REFUSALS) <= built, set(PRINCIPLED_REFUSALS) - built


@pytest.mark.parametrize("model_type", ["gpt2", "bert", "bart", "llama", "gemma3_text", "qwen3", "t5"])
def test_a_saved_tiny_model_loads_offline_and_runs_as_built(model_type, tmp_path: Path):
    folder = tiny_archs.save(model_type, tmp_path / model_type)
    try:
        ours = load_pretrained(folder)
    except ModelRefusedError as error:
        assert model_type in str(error) or folder.name in str(error), error
        pytest.skip(f"refused: {error}")
    model, _ = tiny_archs.tiny(model_type)
    ids = ours.encode("Attention is all you need.").ids[None]  # (1, S)
    decoder = ids[:, :4] if ours.layout == "encoder-decoder" else None
    logits, _ = ours.forward(ids, decoder)
    with torch.no_grad():
        own = model(input_ids=ids, **({"decoder_input_ids": decoder} if decoder is not None else {}))
    expected = own.logits if getattr(own, "logits", None) is not None else own.last_hidden_state
    torch.testing.assert_close(logits, expected, atol=1e-4, rtol=1e-4)


def test_the_tokenizer_agrees_with_the_config():
    model, tokenizer = tiny_archs.tiny("llama")
    assert (tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id) == (
        model.config.pad_token_id, model.config.bos_token_id, model.config.eos_token_id)
    assert max(tokenizer.get_vocab().values()) < model.config.vocab_size
    assert tokenizer.decode(tokenizer("Attention!")["input_ids"]) == "Attention!"


class _Faulty:
    """A wrapped model whose forward or greedy decode drops one switch or changes one number: every check must see it."""

    def __init__(self, fault: str):
        self.fault = fault

    def forward(self, original):
        fault = self.fault

        def forward(self, *args, **kwargs):
            if fault == "scale":
                kwargs.pop("scale", None)
            if fault == "causal":
                kwargs.pop("causal_mask", None)
            if fault == "heads":
                kwargs.pop("heads_off", None)
            if fault == "bias":
                kwargs.pop("position_bias", None)
            logits, maps = original(self, *args, **kwargs)
            if fault == "maps" and not kwargs:  # the plain pass only: the switches' checks stay right
                first = next(iter(maps.keys()))
                maps[first][..., 0, 0] += 1e-3
            return logits, maps

        return forward


@pytest.mark.parametrize("fault", ["maps", "scale", "causal", "heads", "bias", "greedy"])
def test_each_check_fails_when_the_wrapper_gets_its_switch_wrong(fault, monkeypatch):
    if fault == "greedy":
        original = PretrainedTransformer.greedy_decode

        def greedy_decode(self, ids, n, **kwargs):
            written, maps = original(self, ids, n, **kwargs)
            return (written + 1) % self.vocab_size, maps

        monkeypatch.setattr(PretrainedTransformer, "greedy_decode", greedy_decode)
    else:
        monkeypatch.setattr(PretrainedTransformer, "forward", _Faulty(fault).forward(PretrainedTransformer.forward))
    result = coverage.check("t5" if fault == "bias" else "llama")  # a model that adds a position bias, for its switch
    assert result.result == "failed", result
    failed = {name for name, text in result.checks.items() if text.startswith("FAILED")}
    assert failed == {fault}, result.checks
