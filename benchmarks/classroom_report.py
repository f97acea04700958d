"""The classroom benchmark's report (benchmarks.classroom): a table per app of every action's count, errors, p50,
p95, max and the events it sent; the CPU each process spent; the server's memory; the pages opened in Chromium; the
lesson walked in Chromium; and, with a reference app, this tree's p50 and p95 over the reference's."""

from __future__ import annotations

import statistics

from attention_viz.service.limits import WARM_REAL_ENV

from .classroom_chromium import lesson_summary
from .common import ms, table
from .students import OWN_STEPS, REAL_MODELS, SETTLED_S, THINK_S, WAIT_S

LABELS = {"open": "open the page: GET / .. the opening run (HTML, its files, config: the run is in it)",
          "lab_dk": "lab: move d_k",
          "lab_scaled": "lab: switch scaling", "lab_keys": "lab: number of keys",
          "rerun": "Transformer: new text (model reruns)", "heads": "Transformer: a head clicked off (model reruns)",
          "steps": "Transformer: open the steps view", "lesson": "lesson: Next (one step, its chains if any)",
          "real": "real model (74M): pick it, type a sentence",
          "real_score": "real model (74M): score every head of a sentence",
          "outside": "for scale: GET /healthz, through the same middleware, outside Gradio's queue"}


def sent(requests: list | None) -> str:
    """The events an action sent (its chains included): "1", or "min-max (mean)"."""
    if not requests:
        return ""
    low, mean, high = requests
    return f"{low}" if low == high else f"{low}-{high} ({mean:.1f})"


def _app_table(app: dict, labels: dict[str, str] = LABELS) -> str:
    waits = any(a.get("waited") for a in app["actions"].values())
    rows = [[labels[name], a["n"], a["errors"], ms(a["median_s"]) if a["n"] else "", ms(a["p95_s"]) if a["n"] else "",
             ms(a["max_s"]) if a["n"] else "", sent(a.get("requests"))]
            + ([a.get("waited", 0), a.get("told", 0), a.get("eta", 0)] if waits else [])
            for name, a in app["actions"].items()]
    if app["all"]:
        rows.append(["every action after opening", app["all"]["n"], app["errors"] - app["actions"]["open"]["errors"],
                     ms(app["all"]["median_s"]), ms(app["all"]["p95_s"]), "", ""]
                    + ([sum(a.get(k, 0) for n, a in app["actions"].items() if n != "open") for k in ("waited", "told", "eta")]
                       if waits else []))
    if app.get("settled"):
        rows.append([f"every action answered after the first {SETTLED_S:.0f} s", app["settled"]["n"], "",
                     ms(app["settled"]["median_s"]), ms(app["settled"]["p95_s"]), "", ""]
                    + (["", "", ""] if waits else []))
    waited = [f"waited > {WAIT_S:.0f} s", "told their place", "and a time"] if waits else []
    return table(["action", "count", "errors", "p50 ms", "p95 ms", "max ms", "events sent", *waited], rows)


def _cpu_table(app: dict) -> str:
    """The CPU each process on the machine's cores spent while the class arrived (until the last opening was
    answered) and over the whole class: what share of the students' wait is the benchmark's own clients."""
    arrival, wall = app.get("arrival") or {}, app["wall_s"]
    rows = [["the server", f"{arrival.get('server_cpu_s', 0):.1f}", f"{app['server_cpu_s']:.1f}"],
            ["the simulated students (one event loop, this process)", f"{arrival.get('client_cpu_s', 0):.1f}",
             f"{app['client_cpu_s']:.1f}"]]
    return table(["CPU s", f"while the class arrived ({arrival.get('s', 0):.1f} s)",
                  f"over the class ({wall:.0f} s)"], rows)


def _spread(rounds: list[float]) -> str:
    """A median's rounds as "min-max"."""
    return f"{min(rounds):.1f}-{max(rounds):.1f}" if len(rounds) > 1 else ""


def _paired(this: list[float], ref: list[float]) -> str:
    """The median over the rounds of this app's figure over the reference's in the same round."""
    ratios = [a / b for a, b in zip(this, ref, strict=True) if b > 0]
    return f"{statistics.median(ratios):.2f}" if ratios else ""


def _cost_table(result: dict, labels: dict[str, str]) -> str:
    """The server's CPU per answer by kind (every app up at once, measured in turn: benchmarks.classroom_costs.costs), per
    app: the median of the rounds and their range, and this tree's over the reference's, round by round."""
    apps = [key for key in ("this", "ref") if result["apps"].get(key, {}).get("costs")]
    costs = {key: result["apps"][key]["costs"] for key in apps}
    kinds = costs[apps[0]]["kinds"]
    names = [result["names"][key].split(" (")[0] for key in apps]
    head = ["server CPU ms per answer"] + [h for name in names for h in (name, "rounds")]
    both = len(apps) == 2
    rows = [[labels.get(name, name)]
            + [cell for key in apps for cell in (f"{costs[key]['kinds'][name]['cpu_ms']:.1f}",
                                                  _spread(costs[key]["kinds"][name]["rounds_ms"]))]
            + ([_paired(kinds[name]["rounds_ms"], costs["ref"]["kinds"][name]["rounds_ms"])] if both else [])
            for name in kinds]
    rows.append(["the kinds alone, weighed by the mix's shares"]
                + [cell for key in apps for cell in (f"{costs[key]['mix_cpu_ms']:.1f}",
                                                      _spread(costs[key]["mix_rounds_ms"]))]
                + ([_paired(costs["this"]["mix_rounds_ms"], costs["ref"]["mix_rounds_ms"])] if both else []))
    if all("mixed" in costs[key] for key in apps):
        rows.append(["**the mix's average answer** (each page's answers drawn from the mix in turn)"]
                    + [cell for key in apps for cell in (f"**{costs[key]['mixed']['cpu_ms']:.1f}**",
                                                          _spread(costs[key]["mixed"]["rounds_ms"]))]
                    + ([_paired(costs["this"]["mixed"]["rounds_ms"], costs["ref"]["mixed"]["rounds_ms"])]
                       if both else []))
    for key in apps:
        app = result["apps"][key]
        answers = sum(a["n"] for a in app.get("actions", {}).values())
        if answers and app.get("server_cpu_s") is not None:
            index = apps.index(key)
            rows.append([f"over the class ({result['names'][key].split(' (')[0]}: its CPU / its answers, openings "
                         "included)"] + ["", ""] * index + [f"{1e3 * app['server_cpu_s'] / answers:.1f}", ""]
                        + ["", ""] * (len(apps) - index - 1) + ([""] if both else []))
    c = costs[apps[0]]
    errors = sum(k["errors"] for key in apps for k in (*costs[key]["kinds"].values(), costs[key].get("mixed", {}))
                 if k)
    order = " and ".join(result["names"][key].split(" (")[0] for key in c.get("order", apps))
    paired = ", and the median of the rounds' ratios" if both else ""
    idle = ", ".join(f"{costs[key]['idle_cpu_ms_per_s']:.1f}" for key in apps)
    return (f"the server's CPU per answer by kind, on quiet servers ({order} up at once on the same core, measured "
            f"in turn, the order reversed every other round): {c.get('rounds', 1)} rounds, each {c['pages']} fresh "
            f"pages then {c['per_page']} answers each per kind; each server's idle CPU taken off "
            f"({idle} ms/s); the median of the "
            f"rounds, their range{paired}; {errors} errors:\n\n"
            + table(head + (["ratio"] if both else []), rows) + _mix_by_kind(costs, names, labels))


def _mix_by_kind(costs: dict[str, dict], names: list[str], labels: dict[str, str]) -> str:
    """Where the mix's CPU goes: its answers (asked one at a time) by kind, each kind's mean and share, per app."""
    by = {key: c["mixed"].get("by_kind") for key, c in costs.items() if "mixed" in c}
    if not by or not all(by.values()):
        return ""
    kinds = list(next(iter(by.values())))
    rows = [[labels.get(kind, kind)] + [cell for key in by for cell in (
        by[key][kind]["n"], "" if by[key][kind]["cpu_ms"] is None else f"{by[key][kind]['cpu_ms']:.1f}",
        f"{100 * by[key][kind]['share']:.0f} %")] for kind in kinds]
    head = ["the mix's answers by kind"] + [h for name in names for h in (f"{name}: answers", "mean ms", "of its CPU")]
    return ("\n\nthe mix's answers, one at a time, by kind (each answer's server CPU from /proc, counted in 10 ms "
            "ticks: a mean over many; a kind here meets what the mix left, as in a class):\n\n" + table(head, rows))


def _memory_line(samples: list) -> str:
    """The server's VmRSS at the start, each third of the class and the end, and its peak."""
    rss = [mib for _, mib in samples]
    thirds = [rss[min(len(rss) - 1, len(rss) * k // 3)] for k in (1, 2)]
    return (f"server memory (VmRSS, MiB): start {rss[0]:.0f}, a third in {thirds[0]:.0f}, two thirds {thirds[1]:.0f}, "
            f"end {rss[-1]:.0f}, peak {max(rss):.0f}")


def report(result: dict) -> str:
    """A table per app, then this tree's p50 and p95 over the reference's, per action."""
    models = result.get("real_model", "opus-mt-random")
    models = [models] if isinstance(models, str) else models
    real = REAL_MODELS[next((key for key in models if REAL_MODELS[key].writes_text), models[0])]
    labels = {name: text.replace("real model (74M)", real.label if name == "real_score" else
                                 REAL_MODELS[models[0]].label) for name, text in LABELS.items()}
    labels |= {f"real:{key}": f"{REAL_MODELS[key].label}: pick it, type a sentence" for key in models}
    length = ("each run the app's whole budget" if result.get("full_budget") else
              "its runs a trained model's length (benchmarks.trained_length)")
    share = (f"; the real model{'s' if len(models) > 1 else ''} ({', '.join(REAL_MODELS[k].name for k in models)}) "
             f"in {result['real']} % of the actions" if result.get("real") else
             f"; the real model{'s' if len(models) > 1 else ''} ({', '.join(REAL_MODELS[k].name for k in models)}) "
             "set up (the lesson's real steps among its steps), not run by the class"
             if result.get("real") == 0 else "")
    share += f", {length}" if result.get("real") and "opus-mt-random" in models else ""
    share += f", its heads scored in {result['real_score']} %" if result.get("real_score") else ""
    lines = [f"{result['students']} students, {result['duration_s']:.0f} s each app{share}, think time "
             f"{THINK_S[0]}-{THINK_S[1]} s, seed {result['seed']}; latency = join the queue .. last file fetched; "
             + ("opening the page fetches its files too" if result.get("with_files", True) else "opening: HTML only")]
    if result.get("order"):
        lines[0] += f"; order: {' then '.join(result['names'].get(k, k) for k in result['order'])}"
    for key, app in result["apps"].items():
        if not app.get("actions"):
            lines += ["", f"### {result['names'][key]}: no class; {app.get('cores', '')}"]
            continue
        lines += ["", f"### {result['names'][key]}: {app['answers_per_s']:.1f} answers/s, {app['errors']} errors"
                      f"{', ' + str(app['hung']) + ' students hung' if app['hung'] else ''}; load after {app['load_after']}"
                      + (f"; {app['cores']}" if app.get("cores") else ""),
                  "", _app_table(app, labels)]
        lines += [f"  error: {example}" for example in app["error_examples"]]
        if app.get("page_files"):
            lines += ["", f"an opening: {app['page_files'] + 2} requests (GET /, the {app['page_files']} files a "
                          "fresh Chromium fetched, /config)"]
        if app.get("keep_alive_s") is not None:
            lines += ["", f"each student's browser kept an idle connection {app['keep_alive_s']:g} s; "
                          f"{app.get('resent', 0)} requests sent again on a new connection (the server closed a kept "
                          "one as it was used)"]
        if app.get("real_steps"):
            steps = app["real_steps"]
            lines += ["", f"of the lesson's Nexts, {steps['n']} showed a real model's step (after step {OWN_STEPS}): "
                          f"p50 {ms(steps['median_s'])} ms, p95 {ms(steps['p95_s'])} ms"]
        if app.get("drain_s") is not None:
            lines += ["", f"the last answer came {app['drain_s']:.1f} s after the class stopped starting actions "
                          f"({app['hung']} students still waiting at the end)"]
        if app.get("server_cpu_s") is not None:
            lines += ["", _cpu_table(app)]
        if app.get("server_ms_by_third"):
            lines.append("the server's CPU per answer (openings included), by third of the class: " +
                         ", ".join(f"{value:.1f}" for value in app["server_ms_by_third"]) + " ms")
        if app.get("rss_mib"):
            lines.append(_memory_line(app["rss_mib"]))
        if app.get("lesson_walk"):
            lines += ["", lesson_summary(app["lesson_walk"])]
        if app.get("real_load_s") is not None:
            lines += ["", f"the real model's first run (loading it): {app['real_load_s']:.1f} s, before the class"]
            if app.get("real_warm_s") is not None:
                lines += [f"then the lesson's real steps computed at start ({WARM_REAL_ENV}=1): the server busy "
                          f"{app['real_warm_s']:.1f} s more, before the class"]
        if app.get("live_runs") is not None:
            lines += ["", f"live training in the background: {len(app['live_runs'])} runs, ending: "
                          + "; ".join(app["live_runs"])]
    if any(app.get("costs") for app in result["apps"].values()):
        lines += ["", _cost_table(result, labels)]
    if "ref" in result["apps"] and result["apps"]["this"].get("actions") and result["apps"]["ref"].get("actions"):
        this, ref = result["apps"]["this"]["actions"], result["apps"]["ref"]["actions"]
        rows = []
        for name in this:
            if this[name]["n"] and ref[name]["n"]:
                rows.append([labels[name], ms(this[name]["median_s"]), ms(ref[name]["median_s"]),
                             f"{this[name]['median_s'] / ref[name]['median_s']:.2f}", ms(this[name]["p95_s"]),
                             ms(ref[name]["p95_s"]), f"{this[name]['p95_s'] / ref[name]['p95_s']:.2f}"])
        lines += ["", f"this tree against {result['names']['ref']} (ratio < 1: this tree is faster)", "",
                  table(["action", "p50 this", "p50 ref", "ratio", "p95 this", "p95 ref", "ratio"], rows)]
    return "\n".join(lines)
