"""A class pasting pages at once: `--students` visitors each paste a ~`--tokens`-token text into the Long text tab at
the same moment, against the app set up with a real model of SmolLM2-135M's shape (random weights, built here:
never downloaded), and one visitor meanwhile asks our own model for a view every second.

`python -m benchmarks longclass [--students 30] [--tokens 4096] [--layers 2] [--budget-mb 200]`

The model keeps `--layers` of SmolLM2-135M's 30 layers; the server's kept long runs get `--budget-mb`
(ATTENTION_VIZ_LONG_KEPT_MB), far less than the class's runs take. Each student joins /long_read, asks its run for a
region, and once all have answered asks again (a run dropped for room answers "dropped"). Measured: the waits and
region times, errors, the visitor's waits before and during, the server's peak memory and the kept runs' bytes
against the budget (docs/long.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from devtools.launcher import running_app

from .common import RESULTS_DIR, mib, ms, own_loop, percentile, rss_kib, table, write_json
from .browser import API, Page, dependency, elem_ids, opening_values

SMOL = dict(hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3,
            vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0, tie_word_embeddings=True,
            rms_norm_eps=1e-5)  # HuggingFaceTB/SmolLM2-135M's config.json, but its layers
WORDS = ("the class reads every word of a long essay about attention and the model looks back at the first token "
         "while each head finds its own pattern in the page").split()


def smol_shape(folder: Path, layers: int) -> Path:
    """SmolLM2-135M's shape with `layers` layers and random weights (seed 0), saved as safetensors with the tiny
    Llama tokenizer."""
    import torch
    import transformers

    from devtools.hub_models import save_tiny

    save_tiny("llama", folder)  # its tokenizer; the config and weights are replaced
    tiny = transformers.LlamaConfig.from_pretrained(folder)
    config = transformers.LlamaConfig(**SMOL, num_hidden_layers=layers, head_dim=SMOL["hidden_size"] // 9,
                                      bos_token_id=tiny.bos_token_id, eos_token_id=tiny.eos_token_id,
                                      pad_token_id=tiny.pad_token_id)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    return folder


def page_of(folder: Path, tokens: int) -> str:
    """A text of at least `tokens` tokens of the model's tokenizer (words drawn in a fixed order)."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    words, n = [], 0
    while n < tokens:
        words += [WORDS[(len(words) * 7) % len(WORDS)] for _ in range(200)]
        n = len(tokenizer(" ".join(words))["input_ids"])
    return " ".join(words)


def kept_bytes(pid: int, tmp: Path) -> int:
    """Bytes of the temporary files (the long runs' kept numbers: unnamed, in the server's TMPDIR `tmp`) the process
    holds open."""
    total = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(str(tmp)):
                total += os.stat(f"/proc/{pid}/fd/{fd}").st_size
        except OSError:
            continue
    return total


async def opened(base: str) -> Page:
    """A page opened (its HTML and config), waiting as long as a long read takes."""
    page = Page(base, timeout_s=900)
    await page.open()
    return page


async def region_call(page: Page, run: dict) -> tuple[float, dict]:
    """One region of a student's run through the view's server function, as the page asks it."""
    middle = max(256, run["length"] // 2)  # a block below the diagonal, 256 a side (fewer in a short run)
    asked = {"run": run["run"], "what": "region", "key": run["keys"][-1], "head": 1,
             "rows": [middle, min(middle + 256, run["length"])], "cols": [max(0, middle - 256), middle]}
    t0 = time.perf_counter()
    async with page.http.post(page.base + API + "/component_server/", json={
            "data": asked, "component_id": elem_ids(page.config)["long_view"], "fn_name": "long_view",
            "session_hash": page.session_hash}, auto_decompress=True) as answer:
        answer.raise_for_status()
        return time.perf_counter() - t0, json.loads(await answer.read())


async def the_class(base: str, pid: int, tmp: Path, model: str, text: str, students: int) -> dict:
    """The model warmed by one short page; the visitor's view alone; then the class at once, the visitor and a
    poll of the kept runs' bytes beside it; then each student's region again."""
    visit = await opened(base)
    read = dependency(visit.config, "long_read")
    ids = read["inputs"]
    await visit.call(read, {ids[0]: model, ids[1]: "the class reads"}, None)
    visualize, view = dependency(visit.config, "visualize"), opening_values(visit.config)
    alone = [(await visit.call(visualize, view, None))[0] for _ in range(10)]
    rss_before = rss_kib(pid)["VmRSS"] * 1024
    done, kept_max, visitor = asyncio.Event(), [0], []

    async def poll() -> None:
        while not done.is_set():
            kept_max[0] = max(kept_max[0], kept_bytes(pid, tmp))
            await asyncio.sleep(0.2)

    async def visitor_loop() -> None:
        while not done.is_set():
            visitor.append((await visit.call(visualize, view, None))[0])
            await asyncio.sleep(1.0)

    async def student() -> dict:
        page = await opened(base)
        t0 = time.perf_counter()
        try:
            _, completed = await page.call(read, {ids[0]: model, ids[1]: text}, None)
        except Exception as error:  # noqa: BLE001 - counted and shown as an error
            return {"error": str(error)[:200], "wait_s": time.perf_counter() - t0, "page": page}
        wait = time.perf_counter() - t0
        run = completed["output"]["data"][0]
        region_s, answer = await region_call(page, run)
        return {"wait_s": wait, "region_s": region_s, "region_error": answer.get("error"), "run": run,
                "read": run["read"], "page": page, "payload_bytes": len(json.dumps(run))}

    beside = [asyncio.ensure_future(poll()), asyncio.ensure_future(visitor_loop())]
    t0 = time.perf_counter()
    results = await asyncio.gather(*(student() for _ in range(students)))
    class_s = time.perf_counter() - t0
    # each asks its region again: the dropped runs say so
    later = [(await region_call(r["page"], r["run"]))[1] if "run" in r else {"error": "no run"} for r in results]
    done.set()
    await asyncio.gather(*beside)
    for page in [visit, *(r["page"] for r in results)]:
        await page.close()
    return {"results": results, "class_s": class_s, "later": later, "alone": alone, "visitor": visitor,
            "kept_max": kept_max[0], "rss_before": rss_before}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks longclass", description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=2, help="of SmolLM2-135M's 30 (default 2)")
    parser.add_argument("--budget-mb", type=float, default=200.0, help="the server's kept long runs, MiB")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="longclass-"))
    folder = smol_shape(root / "smol-shape", args.layers)
    text = page_of(folder, args.tokens)
    print(f"# A class pasting pages: {args.students} students, ~{args.tokens:,}-token texts, SmolLM2-135M's shape "
          f"with {args.layers} layers (random weights), kept runs' budget {args.budget_mb:.0f} MiB")
    tmp = root / "tmp"
    tmp.mkdir()
    with running_app(root / "app.log", [folder], ATTENTION_VIZ_LONG_KEPT_MB=str(args.budget_mb),
                     TMPDIR=str(tmp)) as server:
        measured = own_loop(the_class(server.base, server.pid, tmp, f"hub:{folder.name}", text, args.students))
        peak = rss_kib(server.pid)["VmHWM"] * 1024
        log_tail = server.log_tail(2000)
    results, later, kept_max = measured["results"], measured["later"], measured["kept_max"]
    class_s, alone, visitor, rss_before = (measured[k] for k in ("class_s", "alone", "visitor", "rss_before"))
    answered = [r for r in results if "error" not in r]
    errors = [r["error"] for r in results if "error" in r] + [r["region_error"] for r in answered if r["region_error"]]
    dropped = sum("dropped to make room" in (answer.get("error") or "") for answer in later)
    kept_later = sum("data" in answer for answer in later)
    waits = [r["wait_s"] for r in answered]
    regions = [r["region_s"] for r in answered]
    per_run = max((r["run"]["length"] for r in answered), default=0)
    budget = args.budget_mb * 2**20
    rows = [
        ["students", args.students], ["tokens read per text", per_run],
        ["answered / errors", f"{len(answered)} / {len(errors)}"],
        ["read: wait p50 / p95 / max, s",
         " / ".join(f"{percentile(waits, q):.1f}" for q in (50, 95, 100)) if waits else "—"],
        ["the class's last answer after, s", f"{class_s:.1f}"],
        ["region (256 x 256, exact) p50 / p95, ms",
         " / ".join(ms(percentile(regions, q)) for q in (50, 95)) if regions else "—"],
        ["payload of a page, kB", f"{max((r['payload_bytes'] for r in answered), default=0) / 1e3:.0f}"],
        ["kept runs' budget, MiB", mib(budget)],
        ["kept runs at most (polled), MiB", mib(kept_max)],
        ["budget held", "yes" if kept_max <= budget else "NO"],
        ["runs kept at the end / dropped (told so)", f"{kept_later} / {dropped}"],
        ["visitor's view alone p50 / p95, ms", " / ".join(ms(percentile(alone, q)) for q in (50, 95))],
        ["visitor's view during the class p50 / p95, ms",
         " / ".join(ms(percentile(visitor, q)) for q in (50, 95)) if visitor else "—"],
        ["server RSS before the class, MiB", mib(rss_before)],
        ["server peak RSS (VmHWM), MiB", mib(peak)],
    ]
    print(table(["measure", "value"], rows))
    if errors:
        print("errors:", errors[:5])
        print(log_tail)
    out = {"args": vars(args), "rows": rows, "waits_s": waits, "regions_s": regions, "visitor_s": visitor,
           "alone_s": alone, "errors": errors}
    write_json(f"longclass-{time.strftime('%Y%m%d-%H%M%S')}", out, RESULTS_DIR)
    return out


if __name__ == "__main__":
    main()
