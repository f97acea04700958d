"""A rerun's decode on the app's default model: `python -m benchmarks decode [--texts 40] [--rounds 5]`.

The shipped reverse model (1/√d_k) on random lowercase texts of 3-12 characters, as a class's students type them, with
0, 1, 2 or 4 heads switched off at random (a class's "head clicked off" reruns): greedy decoding as the reference
(Transformer.greedy_decode), written flat (fast.decode, the app's before a guess), and flat with the task's answer as
a guess (the app's: fast.decode's teacher-forced pass, and where it goes wrong the passes again on what it settled
and its own tokens after, then the steps on from what they settled).
Every decode returns its maps and value norms, as the app's runs do. CPU time (time.process_time) of the whole set of
texts per candidate, medians of interleaved rounds (common.cpu_medians), one thread; per decode.
"""

from __future__ import annotations

import random
import string
import time

import torch

from attention_viz.data.tasks import target_or_none
from attention_viz.fast.decode import greedy_decode as flat_decode
from attention_viz.service.catalog import Catalog

from .common import command, cpu_medians, load, save, table

HEADS_OFF = (0, 1, 2, 4)
KEYS = ("encoder.0.self_attn", "encoder.1.self_attn", "decoder.0.self_attn", "decoder.1.self_attn",
        "decoder.0.cross_attn", "decoder.1.cross_attn")


def cases(n_texts: int, heads: int, n_heads: int, tokenizer, task: str, seed: int = 0) -> list[tuple]:
    """(src [1, S], max_len, heads_off or None, guess ids) for n_texts random texts with `heads` heads off."""
    rng = random.Random(seed * 10 + heads)
    out = []
    for _ in range(n_texts):
        text = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 12)))
        off: dict[str, set[int]] = {}
        for _ in range(heads):
            off.setdefault(rng.choice(KEYS), set()).add(rng.randrange(n_heads))
        out.append((torch.tensor([tokenizer.encode(text).ids]), len(text) + 5,
                    {key: sorted(v) for key, v in off.items()} or None, tokenizer.encode(target_or_none(task, text)).ids))
    return out


def run(n_texts: int = 40, rounds: int = 5) -> dict:
    torch.set_num_threads(1)
    catalog = Catalog()
    network, card = catalog.trained("reverse")
    tok = catalog.tokenizer
    result = {"texts": n_texts, "rounds": rounds, "load_before": load(), "rows": []}
    for heads in HEADS_OFF:
        todo = cases(n_texts, heads, network.config.n_heads, tok, card["task"])

        def decoding(how: str):
            def all_texts() -> None:
                with torch.inference_mode():
                    for src, max_len, off, guess in todo:
                        kwargs = dict(heads_off=off, value_norms={})
                        if how == "reference":
                            network.greedy_decode(src, max_len, **kwargs)
                        else:
                            flat_decode(network, src, max_len, **kwargs, guess=guess if how == "guessed" else None)
            return all_texts

        medians = cpu_medians({how: decoding(how) for how in ("reference", "flat", "guessed")}, rounds, warmup=1)
        result["rows"].append({"heads_off": heads, **{how: s / n_texts for how, s in medians.items()}})
    result["load_after"] = load()
    return result


def report(result: dict) -> str:
    rows = [[f"{r['heads_off']} head{'s' if r['heads_off'] != 1 else ''} off", f"{1e3 * r['reference']:.2f}",
             f"{1e3 * r['flat']:.2f}", f"{1e3 * r['guessed']:.2f}", f"{r['guessed'] / r['flat']:.2f}",
             f"{r['guessed'] / r['reference']:.2f}"] for r in result["rows"]]
    return (f"A decode of the shipped reverse model, {result['texts']} random texts of 3-12 characters, CPU ms per "
            f"decode, medians of {result['rounds']} interleaved rounds, one thread (load {result['load_before']} "
            f"-> {result['load_after']})\n\n"
            + table(["heads switched off", "reference", "flat", "flat, guessed", "guessed / flat",
                     "guessed / reference"], rows))


def main(argv: list[str] | None = None) -> dict:
    parser = command("decode", __doc__)
    parser.add_argument("--texts", type=int, default=40, help="random texts per number of heads off")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = run(args.texts, args.rounds)
    save("decode", result, args.out, started, report)
    return result
