"""Which of transformers' text architectures attention_viz runs exactly: every tiny model of devtools.tiny_archs wrapped
and checked against transformers' own eager attention.

    python -m devtools.coverage                        # every architecture: a table on stdout
    python -m devtools.coverage --write                # ... and into docs/real_models.md, between MARKERS
    python -m devtools.coverage llama gemma2 bart      # some

For each model type: build its tiny model (float64 where the model runs in it, else float32), wrap it with
attention_viz.hub.PretrainedTransformer, and when the wrapper accepts it, check each switch, each against
transformers' own way of making the same change in the eager model (never against attention_viz's):

    maps        every map and the output == eager with output_attentions=True
    scale       scale="none" == eager with every attention module's `scaling` set to 1.0 (the factor its
                forward hands the attention function)
    causal      causal_mask=False == eager given a 4D additive mask of zeros: transformers' documented custom-mask
                path (masking_utils returns a 4D mask as it is), every position sees every other, sliding windows
                and chunks lifted with it, and a module's own causal buffer (GPT-Neo's) all True (decoders and
                encoder-decoders' decoders)
    heads       heads_off {key: [h]} (a head of every attention) == eager with W_O's columns of that head zeroed
                (W_O found here per module: the Linear fed by the attention's output, HEAD_OUTPUTS)
    bias        position_bias=False == eager with every relative_attention_bias table zeroed (models that add a
                position bias to QKᵀ: T5's kin)
    greedy      greedy_decode == generate(do_sample=False, num_beams=1), a few tokens (models that write text)

The attention modules and the order of the maps come from devtools.eager_reference's spy (transformers' attention
interface records each module it is handed and the keyword arguments it gets: sliding_window, softcap, s_aux, ...),
in call order, which is the order of eager's `attentions` tuples and of attention_viz's sorted map keys.

Each architecture's layout, what is special about it, the table and its place in the doc: devtools.coverage_table.
A result is passed, refused (the wrapper's reason), failed (the check and its difference), not built (why) or
skipped (not a text model: devtools.tiny_archs says why).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import inspect
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from devtools import tiny_archs
from devtools.coverage_table import DOC, ROOT, layout_of, special_of, table, write
from devtools.eager_reference import (NotApplicable, bias_zeroed, causal_lifted, difference, eager_pass, heads_zeroed,
                                      spied, unscaled)

PROBE = 8          # tokens of the probe
DECODER_PROBE = 5  # decoder tokens of an encoder-decoder's probe
WRITTEN = 3        # tokens greedy decoding writes
# Relative to max(1, |reference|). Many eager attentions take their softmax in float32 even in a float64 model, so a
# float64 comparison is good to ~1e-6 with the scale on and ~1e-5 with it off (logits up to ~100 in the tiny models).
TOLERANCE = {torch.float64: 1e-5, torch.float32: 1e-4}


@dataclass
class Result:
    """One architecture's coverage: what happened and the largest difference from transformers' eager attention."""

    model_type: str
    layout: str = ""
    special: str = ""
    result: str = ""                     # passed | refused | failed | unchecked (no eager maps to compare) | not built
                                         # | error (this harness's) | skipped
    reason: str = ""                     # why refused, failed, not built or skipped
    max_diff: float | None = None
    dtype: str = ""
    checks: dict[str, str] = field(default_factory=dict)   # check -> "diff 1e-9" | "n/a: why" | "FAILED ..."
    kwargs: dict[str, str] = field(default_factory=dict)   # what the attention function was handed, beyond q, k, v
    fidelity: object = None              # the wrapper's own proof (model.fidelity), where it keeps one
    seconds: float = 0.0


# -- one architecture


def probe(model_type: str, encoder_decoder: bool, vocab: int):
    """(input_ids [1, PROBE], decoder_input_ids [1, DECODER_PROBE] or None): <s> and seeded ordinary characters."""
    generator = torch.Generator().manual_seed(len(model_type))
    top = min(vocab, 100)
    ids = torch.cat([torch.tensor([[tiny_archs.BOS]]),
                     torch.randint(len(tiny_archs.SPECIALS), top, (1, PROBE - 1), generator=generator)], 1)
    decoder = None
    if encoder_decoder:
        decoder = torch.cat([torch.tensor([[tiny_archs.BOS]]),
                             torch.randint(len(tiny_archs.SPECIALS), top, (1, DECODER_PROBE - 1),
                                           generator=generator)], 1)
    return ids, decoder


def check(model_type: str, preview: bool = False) -> Result:
    """Build, wrap and check one model type (the module's docstring). preview: wrap every model the spy found
    attention in, as a wrapper without an allowlist would (_previewed), to try the checks on every architecture."""
    start = time.perf_counter()
    try:
        result = _check(model_type, preview)
    except Exception as error:  # noqa: BLE001 - a defect of this harness, reported as such rather than raised
        result = Result(model_type, result="error", reason=f"the harness raised {_brief(error)}")
    result.seconds = time.perf_counter() - start
    return result


def _check(model_type: str, preview: bool = False) -> Result:
    from attention_viz.hub import ModelRefusedError, PretrainedTransformer

    arch = tiny_archs.arch(model_type)
    result = Result(model_type)
    if arch.skipped:
        result.result, result.reason = "skipped", arch.skipped
        return result
    try:
        model, tokenizer = tiny_archs.tiny(model_type)
    except Exception as error:  # noqa: BLE001 - a config this module cannot shrink: said, not hidden
        result.result, result.reason = "not built", _brief(error)
        return result
    encoder_decoder = bool(getattr(model.config, "is_encoder_decoder", False))
    ids, decoder_ids = probe(model_type, encoder_decoder, model.config.get_text_config().vocab_size)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if decoder_ids is not None:
        inputs["decoder_input_ids"] = decoder_ids
    if "use_cache" in inspect.signature(model.forward).parameters:
        inputs["use_cache"] = False
    result.layout = layout_of(model_type, model, inputs)
    try:
        model, dtype = _widest(model, inputs)
    except Exception as error:  # noqa: BLE001 - a tiny config its own eager code cannot run: nothing to compare with
        result.result, result.reason = "not built", f"its tiny model does not run in eager: {_brief(error)}"
        return result
    result.dtype = str(dtype).replace("torch.", "")
    try:
        calls = spied(model, inputs)
    except Exception as error:  # noqa: BLE001 - the spy is ours; the checks that need it say so
        calls = []
        result.checks["spy"] = f"n/a: {_brief(error)}"
    for call in calls:  # every value each argument took, over the layers
        for name, value in call[4].items():
            seen = result.kwargs.get(name, "").split(" | ") if name in result.kwargs else []
            result.kwargs[name] = " | ".join(dict.fromkeys(seen + [value]))
    result.special = special_of(model, calls)
    subject = copy.deepcopy(model)
    try:
        with _previewed(preview, calls, result.layout, inputs, model):
            ours = PretrainedTransformer(subject, tokenizer, name=model_type)
    except ModelRefusedError as error:
        result.result, result.reason = "refused", str(error)
        return result
    except Exception as error:  # noqa: BLE001 - a wrapper that crashes has not refused with a reason
        result.result, result.reason = "failed", f"wrapping raised {_brief(error)}"
        return result
    result.fidelity = getattr(ours, "fidelity", None)
    tolerance = TOLERANCE[dtype]
    for name, run in _checks(ours, model, inputs, calls, result.layout):
        try:
            outcome = run()
        except NotApplicable as why:
            result.checks[name] = f"n/a: {why}"
            continue
        except Exception as error:  # noqa: BLE001 - ours raised, or differed in shape: the check failed
            result.checks[name] = f"FAILED: {_brief(error)}"
            continue
        if isinstance(outcome, float):
            result.max_diff = max(result.max_diff or 0.0, outcome)
            result.checks[name] = f"{outcome:.1e}" if outcome <= tolerance else f"FAILED: differs by {outcome:.2e}"
        else:
            result.checks[name] = outcome
    failed = [f"{name} {text[8:]}" for name, text in result.checks.items() if text.startswith("FAILED")]
    result.result = "failed" if failed else "passed"
    result.reason = "; ".join(failed)
    if not failed and result.checks["maps"].startswith("n/a"):  # nothing proven: not a pass
        result.result, result.reason = "unchecked", result.checks["maps"][5:]
    return result


@contextlib.contextmanager
def _previewed(preview: bool, calls: list, layout: str, inputs: dict, model):
    """With preview: hub.model.family_of answers every model with a family whose map keys are the spy's modules, in
    call order (encoder layers, then each decoder layer's self and cross-attention), for the length of the block."""
    if not preview or not calls:
        yield
        return
    from attention_viz.core.maps import map_key
    from attention_viz.hub import model as hub_model
    from attention_viz.hub.families import Family

    names, keys = [c[0] for c in calls], []
    if layout == "encoder-decoder":
        try:
            kinds = eager_pass(model, inputs)[1]
        except NotApplicable:  # no per-layer maps to count the encoder's by: wrapped as without preview
            yield
            return
        n = len(kinds["encoder.self_attn"])
        keys = [map_key("encoder", i, "self_attn") for i in range(n)]
        per_layer = 2 if kinds["decoder.cross_attn"] else 1
        keys += [map_key("decoder", i // per_layer, "self_attn" if i % per_layer == 0 else "cross_attn")
                 for i in range(len(names) - n)]
    else:
        stack = "encoder" if layout == "encoder" else "decoder"
        keys = [map_key(stack, i, "self_attn") for i in range(len(names))]
    table = dict(zip(names, keys))

    class Previewed(Family):
        def key_of(self, module_name: str) -> str | None:
            return table.get(module_name)

    family = Previewed("preview", (model.config.model_type,), layout, (), "every attention the spy found")
    original = hub_model.family_of
    hub_model.family_of = lambda config: family
    try:
        yield
    finally:
        hub_model.family_of = original


def _reference(run):
    """The eager reference, or NotApplicable when transformers itself cannot make it."""
    try:
        return run()
    except NotApplicable:
        raise
    except Exception as error:  # noqa: BLE001
        raise NotApplicable(f"the eager reference raised {_brief(error)}") from error


def _checks(ours, model, inputs: dict, calls: list, layout: str):
    """(name, callable) for each check of one wrapped model: a callable returns a difference or a sentence."""
    ids, decoder_ids = inputs["input_ids"], inputs.get("decoder_input_ids")
    args = (ids, decoder_ids) if layout == "encoder-decoder" else (ids,)
    keys = list(ours.map_keys)
    sinks = bool({"s_aux", "sinks"} & set(ours.fidelity.honoured))  # eager may give the rows before the sink:
    # either convention

    def maps():
        reference = _reference(lambda: eager_pass(model, inputs))
        logits, recorded = ours.forward(*args)
        return difference(logits, recorded, layout, reference, sinks)

    def scale():
        if not calls:
            raise NotApplicable("no attention module was found")
        changed = _reference(lambda: unscaled(model, calls))
        reference = _reference(lambda: eager_pass(changed, inputs))
        logits, recorded = ours.forward(*args, scale="none")
        return difference(logits, recorded, layout, reference, sinks)

    def causal():
        if layout == "encoder":
            raise NotApplicable("an encoder has no causal mask")
        changed = dict(inputs)
        T = (decoder_ids if layout == "encoder-decoder" else ids).size(1)
        everything = torch.zeros(1, 1, T, T, dtype=next(model.parameters()).dtype)  # additive: all may attend
        changed["decoder_attention_mask" if layout == "encoder-decoder" else "attention_mask"] = everything
        if layout == "decoder" and "position_ids" in inspect.signature(model.forward).parameters:
            changed["position_ids"] = torch.arange(T)[None]  # positions as a 2D mask would count them
        lifted = causal_lifted(model)

        def lifted_pass():
            try:
                return eager_pass(lifted, changed)
            except Exception:  # noqa: BLE001 - a model that takes no 4D mask (the original GPT's): its own rule,
                if lifted is model:  # lifted, is its only causal mask
                    raise
                return eager_pass(lifted, inputs)

        reference = _reference(lifted_pass)
        logits, recorded = ours.forward(*args, causal_mask=False)
        return difference(logits, recorded, layout, reference, sinks)

    def heads():
        if not calls:
            raise NotApplicable("no attention module was found")
        if len(calls) != len(keys):
            raise NotApplicable(f"{len(calls)} attention calls but {len(keys)} maps: no one-to-one order")
        if len({c[0] for c in calls}) != len(calls):
            raise NotApplicable("a module attends more than once a pass (shared layers)")
        off = [i % ours.n_heads for i in range(len(keys))]
        changed = _reference(lambda: heads_zeroed(model, calls, off))
        reference = _reference(lambda: eager_pass(changed, inputs))
        logits, recorded = ours.forward(*args, heads_off={key: [h] for key, h in zip(keys, off)})
        return difference(logits, recorded, layout, reference, sinks)

    def bias():
        if not ours.abilities.position_bias:
            raise NotApplicable("it adds no position bias to QKᵀ")
        changed = _reference(lambda: bias_zeroed(model))
        reference = _reference(lambda: eager_pass(changed, inputs))
        logits, recorded = ours.forward(*args, position_bias=False)
        return difference(logits, recorded, layout, reference, sinks)

    def greedy():
        if not ours.abilities.writes_text:
            raise NotApplicable("it writes no text")
        written, _ = ours.greedy_decode(ids, WRITTEN)
        options = {"attention_mask": torch.ones_like(ids), "max_new_tokens": WRITTEN, "do_sample": False,
                   "num_beams": 1}
        expected = _reference(lambda: model.generate(ids, **options))
        expected = expected[:, 1:] if layout == "encoder-decoder" else expected[:, ids.size(1):]
        if not torch.equal(written, expected[:, : written.size(1)]) or written.size(1) == 0 or (
                written.size(1) < expected.size(1) and int(written[0, -1]) not in ours.eos_ids):
            return f"FAILED: wrote {written.tolist()}, generate {expected.tolist()}"
        return f"same {written.size(1)} tokens"

    return [("maps", maps), ("scale", scale), ("causal", causal), ("heads", heads), ("bias", bias), ("greedy", greedy)]


def _widest(model, inputs: dict):
    """The model in float64 when its eager pass runs in it, else float32 (its own error when it runs in neither)."""
    wide = copy.deepcopy(model).double()
    try:
        with torch.no_grad():
            wide(**inputs)
        return wide, torch.float64
    except Exception:  # noqa: BLE001 - kernels and buffers that insist on float32 (MoE grouped matmuls, ...)
        with torch.no_grad():
            model(**inputs)
        return model, torch.float32


def _brief(error: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    text = str(error).strip().splitlines()
    line = re.sub(r"\s+", " ", text[0] if text else "")
    return f"{type(error).__name__}: {line[:160]}" if line else type(error).__name__


# -- every architecture


def run(model_types=None, progress=None, preview: bool = False) -> list[Result]:
    """check() for each model type (every one of tiny_archs.architectures() by default), one torch thread."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        types = model_types or [a.model_type for a in tiny_archs.architectures()]
        results = []
        for model_type in types:
            results.append(check(model_type, preview))
            if progress:
                progress(results[-1])
        return results
    finally:
        torch.set_num_threads(previous)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_types", nargs="*", help="model types (default: every one transformers' mappings hold)")
    parser.add_argument("--write", action="store_true", help=f"write the table into {DOC.relative_to(ROOT)}")
    parser.add_argument("--preview", action="store_true",
                        help="wrap every model the spy finds attention in (no allowlist), to try the checks")
    parser.add_argument("--json", type=Path, help="every result, its checks and its attention arguments, as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="every check of every architecture")
    options = parser.parse_args(argv)
    start = time.perf_counter()

    def progress(r: Result) -> None:
        if r.result == "skipped" and not options.verbose:
            return
        print(f"{r.model_type:30s} {r.result:9s} {r.seconds:5.2f}s {r.reason[:150]}", file=sys.stderr)
        if options.verbose:
            print(f"{'':30s} {r.checks} {r.kwargs}", file=sys.stderr)

    results = run(options.model_types or None, progress, options.preview)
    print(table(results))
    print(f"\n{time.perf_counter() - start:.1f} s", file=sys.stderr)
    if options.write:
        write(results)
    if options.json:
        rows = [{**dataclasses.asdict(r), "fidelity": repr(r.fidelity) if r.fidelity is not None else None}
                for r in results]
        options.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
