"""The benchmark harness measures what it says: tiny kernel and model runs, the helpers, the one command.

No assertion here is about speed: tests never time anything. They prove the harness checks that
ours and PyTorch's references compute the same thing before timing them, that every candidate is
timed, and that `python -m benchmarks` prints its tables and writes its JSON.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import attention_viz.core.attention as attention_module
from attention_viz.core.attention import MultiHeadAttention
from attention_viz.core.model import Transformer
from benchmarks import common, kernel, model
from benchmarks.__main__ import main, parse_args

CPU = torch.device("cpu")


def test_percentile_matches_numpy():
    samples = [5.0, 1.0, 3.0, 2.0, 4.0, 10.0, 7.0]
    for q in (0, 50, 95, 100):
        assert common.percentile(samples, q) == pytest.approx(np.percentile(samples, q))


def test_interleaved_times_every_candidate_every_round_in_rotating_order():
    order = []
    candidates = {name: (lambda name=name: order.append(name)) for name in "abc"}
    timings = common.interleaved(candidates, rounds=3, sample_s=0.0, warmup=2)
    assert {name: len(t.samples) for name, t in timings.items()} == {"a": 3, "b": 3, "c": 3}
    timed = order[9:]  # after two warm-up calls and one sizing call each; one call per sample (sample_s=0)
    assert timed == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert all(s >= 0 for t in timings.values() for s in t.samples)


def test_the_event_stream_reads_its_own_answer_and_refuses_another():
    """benchmarks.common.EventStream (the class's and the app benchmark's reader of /queue/data): its place told, its
    answer; another event's answer, or a stream that ends without one, is an error."""
    import time

    stream = common.EventStream("e1", time.perf_counter())
    lines = ['data: {"msg": "estimation", "event_id": "e1", "rank": 2, "queue_size": 5}', ": heartbeat",
             b'data: {"msg": "process_completed", "event_id": "e1", "success": true, "output": {"data": [1]}}\n',
             'data: {"msg": "close_stream"}']
    assert [stream.read(line) for line in lines] == [False, False, False, True]
    assert stream.answer()["output"]["data"] == [1] and stream.estimations[0]["rank"] == 2
    with pytest.raises(RuntimeError, match="another event"):
        common.EventStream("e1", time.perf_counter()).read('data: {"msg": "process_completed", "event_id": "e2"}')
    ended = common.EventStream("e1", time.perf_counter())
    assert ended.read('data: {"msg": "close_stream"}')
    with pytest.raises(RuntimeError, match="event failed"):
        ended.answer()


def test_table_is_markdown_with_one_row_per_item():
    text = common.table(["n", "ms"], [[16, "1.0"], [64, "2.5"]])
    lines = text.splitlines()
    assert len(lines) == 4 and lines[1].startswith("|:") and lines[2].startswith("| 16")


def test_kernel_harness_checks_and_times_every_candidate():
    result = kernel.run(CPU, quick=True, sizes=(8,), rounds=1)
    (row,) = result["sizes"]
    assert set(row["timings"]) == set(kernel.CANDIDATES)
    assert row["weights_bytes"] == kernel.HEADS * 8 * 8 * 4
    assert result["mm_peak"]["gflops"] > 0
    assert "| 8 " in kernel.report(result)


def test_kernel_harness_refuses_to_time_a_wrong_kernel(monkeypatch):
    def wrong(q, k, v, mask=None, scale="sqrt_dk", dropout_p=0.0):
        out, weights = attention_module.scaled_dot_product_attention(q, k, v, mask, "none", dropout_p)
        return out, weights

    monkeypatch.setattr(kernel, "scaled_dot_product_attention", wrong)
    with pytest.raises(AssertionError):
        kernel.bench_size(8, CPU, rounds=1, budget_s=1)


def test_model_harness_checks_ours_against_nn_transformer_and_times_three_candidates():
    result = model.run(CPU, lengths=(5,), models=("app",), rounds=1)
    (row,) = result["rows"]
    assert set(row["timings"]) == set(model.CANDIDATES)
    config = model.app_default_config()
    assert row["maps"] == config.n_encoder_layers + 2 * config.n_decoder_layers
    assert row["maps_bytes"] > 0
    assert "capture cost" in model.report(result)


def test_use_kernel_changes_one_model_and_no_module_global():
    ours = Transformer(model.app_default_config()).eval()
    other = Transformer(model.app_default_config()).eval()
    ours.use_kernel(model.sdpa_without_weights)
    kernels = {m.kernel for m in ours.modules() if isinstance(m, MultiHeadAttention)}
    assert kernels == {model.sdpa_without_weights}
    assert {m.kernel for m in other.modules() if isinstance(m, MultiHeadAttention)} == {
        attention_module.scaled_dot_product_attention}


def test_cli_rejects_unknown_sections():
    with pytest.raises(SystemExit):
        parse_args(["--only", "kernel,nonsense"])


def test_one_command_prints_tables_and_writes_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(kernel, "QUICK_SIZES", (8,))
    monkeypatch.setattr(model, "QUICK_LENGTHS", (4,))
    main(["--quick", "--only", "kernel,model", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "## Kernel, CPU" in printed and "## Model, CPU" in printed
    if not torch.cuda.is_available():
        assert "no CUDA device: skipped" in printed
    latest = json.loads((tmp_path / "latest.json").read_text())
    assert {"kernel_cpu", "model_cpu"} <= set(latest["sections"])
    assert latest["machine"]["cores"] >= 1
    assert len(list(tmp_path.glob("run-*-quick.json"))) == 1


def test_the_decode_benchmark_times_three_decodes_at_every_number_of_heads_off():
    from benchmarks import decode

    result = decode.run(n_texts=2, rounds=1)
    assert [row["heads_off"] for row in result["rows"]] == list(decode.HEADS_OFF)
    assert all(row[how] > 0 for row in result["rows"] for how in ("reference", "flat", "guessed"))
    text = decode.report(result)
    assert "| 1 head off " in text and "| 4 heads off " in text and "guessed / reference" in text


def test_classroom_students_open_the_page_act_and_every_answer_is_checked(app_url, monkeypatch):
    """Two students for a few seconds against the launched app: no errors, every answer checked; the report's
    tables, one per app and the ratios. (Latencies are only reported, never asserted.)"""
    from benchmarks import classroom

    monkeypatch.setattr(classroom, "ARRIVAL_S", 0.5)
    files = classroom.page_files(app_url.rstrip("/"))  # what a fresh Chromium fetched: Gradio's front end
    assert len(files) > 20 and all(f.startswith(("/assets/", "/static/", "/theme.css")) for f in files), files
    assert any(f.endswith(".js") for f in files) and any(f.endswith(".css") for f in files)
    result = classroom.run_class(app_url.rstrip("/"), students=2, duration_s=9, seed=1, files=files, keep_alive_s=15)
    assert result["errors"] == 0 and not result["hung"], result["error_examples"]
    assert result["keep_alive_s"] == 15 and result["resent"] == 0  # the app keeps an idle connection longer
    assert result["actions"]["open"]["n"] == 2
    assert sum(a["n"] for name, a in result["actions"].items() if name != "open") >= 2
    app = {**result, "load_after": [0.0, 0.0, 0.0]}
    text = classroom.report({"students": 2, "duration_s": 9, "seed": 1, "names": {"this": "this tree", "ref": "main"},
                             "apps": {"this": app, "ref": app}})
    assert "### this tree" in text and "### main" in text and "| open the page: GET /" in text and "p50 ref" in text
    assert "kept an idle connection 15 s; 0 requests sent again" in text
    assert len(result["server_ms_by_third"]) == 3 and "by third of the class: " in text
    assert result["arrival"]["s"] > 0 and result["actions"]["open"]["requests"] == [0, 0, 0]  # no load event
    with pytest.raises(SystemExit):  # a class is one benchmark of its own: python -m benchmarks classroom
        parse_args(["--only", "classroom"])


def test_a_student_walks_the_lesson_one_event_a_step_and_a_wrong_step_is_an_error(app_url, monkeypatch):
    """The lesson action: Next from the step on show, through the last and round to the first again, each answer the
    next step, each one event; an answer showing another step is reported wrong."""
    import asyncio
    import random

    from benchmarks.browser import Page
    from benchmarks.students import Student

    async def walk() -> None:
        page = Student(Page(app_url.rstrip("/")), random.Random(0))
        try:
            await page.open()
            page.lesson_at = -1
            shown = []
            for _ in range(12):  # more than the lesson's steps: it wraps
                seconds, wrong = await page.act("lesson")
                assert wrong is None and seconds > 0 and page.requests == 1, (wrong, page.requests)
                shown.append(page.lesson_at + 1 if page.lesson_at >= 0 else "last")
            assert shown[:3] == [1, 2, 3] and "last" in shown and shown[shown.index("last") + 1] == 1, shown
            lesson_text = page.lesson["outputs"].index(page.ids["lesson_text"])
            answer = [None] * len(page.lesson["outputs"])
            answer[lesson_text] = "<p><strong>Step 5 of 10: something else.</strong></p>"

            async def call(dep, trigger=None):
                return 0.01, answer

            monkeypatch.setattr(page, "call", call)
            page.lesson_at = 0
            assert (await page.act("lesson"))[1] == "lesson: Next from step 0 showed step 5 of 10"
        finally:
            await page.browser.close()

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:  # out of reach of any Playwright loop an earlier test left
        pool.submit(asyncio.run, walk()).result()


def test_the_cost_of_each_kind_of_answer_is_measured_app_by_app_in_rounds(app_url):
    """benchmarks.classroom_costs.costs: every kind of the mix asked alone, in rounds that visit each app in turn (here the
    same server under two names), its answers counted and checked, the server's CPU per answer from /proc (a number:
    never asserted on), the mix's average by its shares and the mix asked as a class asks it; the table with this tree's over the reference's."""
    from benchmarks import classroom, classroom_costs

    base = app_url.rstrip("/")
    mix = {"lab_scaled": 60, "steps": 40}
    result = classroom_costs.costs({"this": (base, None), "ref": (base, None)}, {}, mix, pages=2, per_page=1, rounds=2)
    assert set(result) == {"this", "ref"}
    for costs in result.values():
        assert set(costs["kinds"]) == {"open", *mix, "outside"}, costs  # outside: a request outside the queue
        assert all(kind["n"] == (4 * classroom_costs.OUTSIDE_GETS if name == "outside" else 4) and kind["errors"] == 0
                   and len(kind["rounds_ms"]) == 2 for name, kind in costs["kinds"].items()), costs
        assert isinstance(costs["mix_cpu_ms"], float) and costs["pages"] == 2 and len(costs["mix_rounds_ms"]) == 2
        # the mix itself: each page's answers drawn from it, counted and checked like the kinds'
        assert costs["mixed"]["n"] == 4 and costs["mixed"]["errors"] == 0 and len(costs["mixed"]["rounds_ms"]) == 2
        by_kind = costs["mixed"]["by_kind"]  # and each of its answers' CPU by its kind: every answer counted once
        assert set(by_kind) == set(mix) and sum(k["n"] for k in by_kind.values()) == 4, by_kind
        shares = [k["share"] for k in by_kind.values()]
        assert abs(sum(shares) - 1) < 1e-9 or not any(shares), by_kind  # (no pid here: no CPU read, no shares)
    apps = {key: {"costs": costs, "actions": {}, "cores": "not pinned"} for key, costs in result.items()}
    text = classroom.report({"students": 0, "duration_s": 5, "seed": 0, "apps": apps, "order": ["this", "ref"],
                             "names": {"this": "this tree (abc)", "ref": "main (def)"}})
    assert "the server's CPU per answer by kind" in text and "| lab: switch scaling" in text, text
    assert "| for scale: GET /healthz, through the same middleware, outside Gradio's queue" in text, text
    assert "the kinds alone, weighed by the mix's shares" in text and "**the mix's average answer**" in text
    by_kind = text.split("the mix's answers, one at a time, by kind")
    assert len(by_kind) == 2 and "| lab: switch scaling" in by_kind[1], text
    assert "no class" in text and "| ratio |" in text
    assert "this tree and main up at once" in text and "2 rounds" in text


def test_the_payload_check_finds_a_difference_and_says_where():
    from benchmarks import payloads

    same = ['{"data": [1, "a"]}', '{"data": [2]}']
    assert payloads.compare(same, list(same)) == []
    (found,) = payloads.compare(same, ['{"data": [1, "b"]}', '{"data": [2]}'])
    assert found.startswith("record 0: differs at character 14"), found  # where "a" and "b" part
    assert payloads.compare(same, same[:1]) == ["2 records against 1"]


def test_the_lesson_walked_in_chromium_sends_one_event_a_step(app_url):
    from concurrent.futures import ThreadPoolExecutor

    from benchmarks.classroom_chromium import lesson_summary, walk_lesson

    with ThreadPoolExecutor(max_workers=1) as pool:  # out of reach of any Playwright loop an earlier test left
        steps = pool.submit(walk_lesson, app_url.rstrip("/"), 3).result()
    assert [s.get("step") for s in steps] == [1, 2, 3], steps
    assert all(s["requests"] == 1 and s["shown_ms"] > 0 and s["answered_ms"] > 0 for s in steps), steps
    assert "events sent per step 1-1" in lesson_summary(steps)


def test_the_real_model_benchmark_times_ours_eager_and_sdpa_and_reports_them():
    pytest.importorskip("transformers")
    from benchmarks import hub

    small = dict(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                 encoder_ffn_dim=32, decoder_ffn_dim=32, vocab_size=58101)
    result = hub.capture(sizes=(4,), rounds=2, decode=(2,), decode_rounds=2, **small)
    (row,) = result["forward"]
    assert row["tokens"] == 4 and all(row[name]["n"] == 2 for name in ("ours", "eager", "sdpa"))
    (decoded,) = result["decode"]
    assert decoded["written"] == 2 and decoded["ours"]["n"] == 2
    result |= {"threads": 1, "load_before": [0, 0, 0], "load_after": [0, 0, 0],
               "memory": {"after_import_bytes": 2**20, "built_bytes": 2**21, "used_bytes": 2**22}}
    text = hub.report(result)
    assert "ours / eager" in text and "MiB" in text
    assert any(line.startswith("|") and line.split("|")[1].strip() == "4" for line in text.splitlines())


def test_the_classroom_mix_with_a_real_model_and_its_heads_scored_is_whole():
    from benchmarks import classroom
    from benchmarks.classroom_report import LABELS
    from benchmarks.students import real_actions

    for share, score in ((10, 0), (10, 2), (15, 15)):
        mix = real_actions(share, score)
        assert sum(mix.values()) == 100 and mix["real"] == share and mix.get("real_score", 0) == score, mix
        assert all(v >= 0 for v in mix.values()) and set(mix) <= set(LABELS), mix
    with pytest.raises(SystemExit):
        classroom.main(["--real-score", "2"])  # scoring a real model's heads needs the real model
    mix = real_actions(10, 2, ("minilm", "opus-mt-random"))  # two real models: one action each, the share split
    assert sum(mix.values()) == 100 and mix["real:minilm"] == mix["real:opus-mt-random"] == 5 and "real" not in mix
    timing = {"n": 1, "errors": 0, "median_s": 0.5, "p95_s": 0.9, "max_s": 0.9}
    app = {"answers_per_s": 1.0, "errors": 0, "hung": 0, "load_after": [0.0] * 3, "error_examples": [], "all": {},
           "actions": {"open": timing} | {name: timing for name in mix}}
    text = classroom.report({"students": 1, "duration_s": 5, "seed": 0, "names": {"this": "this tree"},
                             "apps": {"this": app}, "real": 10, "real_score": 2,
                             "real_model": ["minilm", "opus-mt-random"]})
    assert "| trained BERT (22M): pick it, type a sentence" in text and "| real model (74M): pick it, type" in text
    assert "| real model (74M): score every head" in text and "a trained model's length" in text
    for wrong in ("minilm,nope", ""):
        with pytest.raises(SystemExit):
            classroom.main(["--real", "--real-model", wrong])


def test_the_class_waits_for_a_servers_start_up_work_before_it_arrives():
    """benchmarks.common.wait_idle (the class with real models set up waits for the lesson's real steps to be
    computed): it returns only once the process has spent two windows in a row nearly idle, so a process busy for
    its first second is waited out; an idle one is waited two windows."""
    import subprocess
    import sys
    import time

    busy = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                             "while time.process_time() - t < 1.0: pass\ntime.sleep(30)"])
    try:
        t0 = time.monotonic()
        waited = common.wait_idle(busy.pid, timeout_s=20, window_s=0.2, busy_s=0.05)
        assert waited >= 1.0 and time.monotonic() - t0 >= 1.0 and waited < 20
        assert common.cpu_s(busy.pid) >= 1.0  # it had done its work when the wait ended
        assert 0.4 <= common.wait_idle(busy.pid, timeout_s=20, window_s=0.2, busy_s=0.05) < 2.0
    finally:
        busy.kill()
        busy.wait()
    from benchmarks import classroom

    timing = {"n": 1, "errors": 0, "median_s": 0.5, "p95_s": 0.9, "max_s": 0.9}
    app = {"answers_per_s": 1.0, "errors": 0, "hung": 0, "load_after": [0.0] * 3, "error_examples": [], "all": {},
           "actions": {"open": timing, "lab_dk": timing}, "real_load_s": 1.2, "real_warm_s": 3.4,
           "real_steps": {"n": 7, "median_s": 0.004, "p95_s": 0.02}}
    text = classroom.report({"students": 1, "duration_s": 5, "seed": 0, "names": {"this": "this tree"},
                             "apps": {"this": app}, "real": 0, "real_model": ["minilm"]})
    assert "(all-MiniLM-L6-v2) set up (the lesson's real steps among its steps), not run by the class" in text
    assert "the server busy 3.4 s more, before the class" in text and "% of the actions" not in text
    assert "of the lesson's Nexts, 7 showed a real model's step (after step 9): p50 4.00 ms, p95 20.0 ms" in text
    from attention_viz.service.lesson import Lesson
    from benchmarks.students import OWN_STEPS

    assert OWN_STEPS == len(Lesson.TITLES)  # the steps after ours are the real models
    with pytest.raises(SystemExit):
        classroom.main(["--real", "0", "--against", "main"])  # a ref may not have real models


def test_a_capped_server_runs_in_a_cpu_cgroup_of_its_own_or_the_class_says_why_not(tmp_path, monkeypatch):
    """benchmarks.common.capped (classroom --server-share): the prefix makes the server's process join a CPU cgroup
    with the quota asked, where this machine lets one be made; elsewhere the prefix is unchanged and says why."""
    import subprocess
    import sys

    prefix, where = common.capped([], 40, "attention_viz-test-capped")
    if where.startswith("its core capped at 40 %"):
        group = Path(where.split("(cgroup ")[1].split(":")[0])
        try:
            quota = (group / "cpu.max").read_text().split() if (group / "cpu.max").exists() else [
                (group / "cpu.cfs_quota_us").read_text().strip()]
            assert quota[0] == "40000" and "2.5x slower" in where
            seen = subprocess.run([*prefix, sys.executable, "-c", "print(open('/proc/self/cgroup').read())"],
                                  capture_output=True, text=True, check=True).stdout
            assert "/attention_viz-test-capped" in seen  # the server's own process is in the group
        finally:
            group.rmdir()
    else:
        assert prefix == [] and where.startswith("not capped: no CPU cgroup could be made here")
    monkeypatch.setattr(common, "CGROUPS", tmp_path)  # no controllers, no cpu hierarchy: nothing to join
    assert common.capped(["taskset", "-c", "0"], 40, "x") == (
        ["taskset", "-c", "0"], f"not capped: no CPU cgroup could be made here (FileNotFoundError: [Errno 2] No such "
                                f"file or directory: '{tmp_path / 'cpu' / 'x'}')")


def test_the_trained_length_app_gives_a_real_translation_a_trained_models_length(monkeypatch):
    """benchmarks.trained_length: every budget the app asks for a source of S pieces is ceil(1.2 S) (at most the
    app's cap), a continuation's unchanged; it covers every module of the package that asks for one."""
    from pathlib import Path

    import attention_viz
    from attention_viz.service import hub_model, limits
    from benchmarks import trained_length

    for module in trained_length.callers():  # restored after the test
        monkeypatch.setattr(module, "real_new_tokens", module.real_new_tokens)
    trained_length.install()
    budget = hub_model.real_new_tokens
    assert [budget(s, True) for s in (1, 5, 10, 11, 40)] == [2, 6, 12, 14, limits.REAL_NEW_TOKENS]
    assert budget(10, True) == 12 and limits.real_new_tokens(10, True) == 25
    assert budget(7, False) == limits.real_new_tokens(7, False)
    package = Path(attention_viz.__file__).parent
    callers = {path for path in package.rglob("*.py") if "real_new_tokens(" in path.read_text()} - {
        Path(limits.__file__)}
    assert callers == {Path(module.__file__) for module in trained_length.callers()}


def test_the_trained_model_benchmark_checks_ours_against_eager_and_reports_each_part(minilm_folder):
    pytest.importorskip("transformers")
    from benchmarks import classroom, trained

    (row,) = trained.forward(sizes=(8,), rounds=2)
    assert row["tokens"] == 8 and row["max_map_difference"] <= 1e-5 and row["ours"]["n"] == 2
    result = {"threads": 1, "load_before": [0, 0, 0], "load_after": [0, 0, 0], "forward": [row],
              "loading": {"cold_s": [1.0], "warm_s": [1e-4] * 3, "load_pretrained_s": [0.1] * 3},
              "importance": trained.importance()}
    text = trained.report(result)
    assert "cold: sha256 of model.zip checked" in text and "ours / eager" in text
    assert "head importance: refused: BERT is an encoder only" in text  # what the service does with an encoder
    with pytest.raises(SystemExit):  # an encoder's heads cannot be scored: refused before any app starts
        classroom.main(["--real", "--real-model", "minilm", "--real-score", "2"])


def test_a_page_reads_an_answer_of_megabytes_from_the_event_stream():
    """benchmarks.browser.Page reads an event's answer however long its line (a long text's run is megabytes: the
    longclass's students read none while a line past aiohttp's 512 KiB was refused), and what it reads is whole."""
    import asyncio
    import threading

    from aiohttp import web

    from benchmarks.browser import API, Page

    long_value = "x" * (3 << 20)  # 3 MiB in one message
    done = {"msg": "process_completed", "event_id": "e1", "success": True, "output": {"data": [long_value]}}

    async def join(request):
        return web.json_response({"event_id": "e1"})

    async def data(request):
        answer = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await answer.prepare(request)
        for message in ({"msg": "estimation", "event_id": "e1", "rank": 0, "queue_size": 1}, done,
                        {"msg": "close_stream"}):
            await answer.write(f"data: {json.dumps(message)}\n\n".encode())
        return answer

    async def scenario():
        app = web.Application()
        app.router.add_post(API + "/queue/join", join)
        app.router.add_get(API + "/queue/data", data)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        page = Page(f"http://127.0.0.1:{port}")
        try:
            return await page.call({"inputs": [], "id": 0}, {}, None)
        finally:
            await page.close()
            await runner.cleanup()

    # a thread of its own: Playwright's sync API may keep an event loop running in this one (asyncio.run refuses then)
    result = {}
    thread = threading.Thread(target=lambda: result.update(answer=asyncio.run(scenario())))
    thread.start()
    thread.join(timeout=120)
    _, completed = result["answer"]
    assert completed["output"]["data"] == [long_value]


def test_the_export_benchmark_times_the_first_files_and_every_file_as_the_button_runs_them(app_url):
    """benchmarks.export against the launched app, one round on the shipped model: the button's event lists the files
    but the four figures, its chain all nine, each for the head asked; the table says both. (Times only reported.)"""
    from benchmarks import export

    app = export.Exporter("this tree", app_url.rstrip("/"))
    results = common.own_loop(export.measure([app], {"reverse": ("reverse/sqrt_dk", 2, 4)}, rounds=1))
    (answer,) = results[("this tree", "reverse")]
    assert (answer["first_files"], answer["files"]) == (5, 9) and answer["every_s"] > answer["first_s"] > 0
    row = next(line for line in export.report(results).splitlines() if "this tree" in line)
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells == ["reverse", "this tree", f"{answer['first_s']:.2f} ({answer['first_s']:.2f})", "5",
                     f"{answer['every_s']:.2f} ({answer['every_s']:.2f})", "9"]
