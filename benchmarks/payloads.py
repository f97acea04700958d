"""Every answer of a fixed script of requests, recorded from two apps and compared byte for byte: a change made for
speed must not change what any answer holds.

    python -m benchmarks payloads --against 2d03545     (this tree's app, then the ref's; exit 1 on a difference)

The script: PAGES pages, each opening the page, then ROUNDS rounds of every action of the classroom's mix
(benchmarks.students: the lab's d_k, scaling and keys, a new text, a head clicked off, the steps view, the
lesson's Next), in an order drawn from a fixed seed, the pages taking turns; every event each action sends (its
chains too) is recorded: its answer's data as JSON, its keys in the order sent (a file the answer names by its
bytes' SHA-256, not its URL, which holds the server's port and temporary folder), under its endpoint's name (an
event without one: its trigger's elem_id and event, as ids move when events are added). A lab answer asked beside
the queue (the view's server function) is recorded as /dk_lab's, whose data it holds, and a steps answer so as
/steps'. The page's opening values
(every component's value in its config, the opening run among them) are recorded too. Two apps that answer the same
script with the same records answer it the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import sys
import time
from pathlib import Path

import httpx

from devtools.launcher import ROOT, Server

from .common import LOGS, app_env, export_ref, temp_folder
from .browser import Page, elem_ids
from .students import ACTIONS, Student

PAGES = 2
ROUNDS = 4
SEED = 7


class RecordingPage(Page):
    """A Page that keeps every answer it gets, in order, as JSON (its keys in the order they came)."""

    def __init__(self, base: str, records: list[str]) -> None:
        super().__init__(base)
        self.records = records

    async def call(self, dependency: dict, values: dict[int, object], trigger_id: int | None) -> tuple[float, dict]:
        seconds, completed = await super().call(dependency, values, trigger_id)
        data = [await self._file(item) if isinstance(item, dict) and item.get("url") else item
                for item in completed["output"]["data"]]
        self._record(dependency.get("api_name") or self._trigger(dependency), data)
        return seconds, completed

    async def beside(self, component_id: int, fn_name: str, data: object) -> object:
        answer = await super().beside(component_id, fn_name, data)
        if fn_name == "lab_answer" and isinstance(answer, dict):  # what /dk_lab answers: [view, numbers]
            self._record("dk_lab", [answer.get("view"), answer.get("numbers")])
        if fn_name == "steps_answer" and isinstance(answer, dict):  # what /steps answers: [steps, text]
            self._record("steps", [answer.get("steps"), answer.get("text")])
        return answer

    def _record(self, name: str, data: list) -> None:
        self.records.append(json.dumps({"event": name, "data": data}, ensure_ascii=False))

    def _trigger(self, dependency: dict) -> str:
        """An unnamed event by what triggers it: elem_id.event (component ids move less than events' ids, but an
        elem_id is the page's own name)."""
        names = {i: elem for elem, i in elem_ids(self.config).items()}
        return "+".join(f"{names.get(target, target)}.{event}" for target, event in dependency["targets"])

    async def _file(self, item: dict) -> dict:
        body = await self.get(item["url"], decoded=True)
        return {"file_sha256": hashlib.sha256(body).hexdigest(), "size": len(body)}


async def _script(base: str) -> list[str]:
    records: list[str] = []
    rng = random.Random(SEED)
    pages = [Student(RecordingPage(base, records), random.Random(SEED * 100 + i)) for i in range(PAGES)]
    try:
        for student in pages:
            await student.open()
            opening = {c["props"].get("elem_id") or c["id"]: c["props"].get("value")
                       for c in student.browser.config["components"]}
            records.append(json.dumps({"opening values": opening}, ensure_ascii=False))
        for _ in range(ROUNDS):
            kinds = list(ACTIONS)
            rng.shuffle(kinds)
            for kind in kinds:
                for student in pages:
                    _, wrong = await student.act(kind)
                    records.append(json.dumps({"action": kind, "wrong": wrong}))
    finally:
        for student in pages:
            await student.browser.close()
    return records


def record(tree: Path, name: str) -> list[str]:
    """Start `tree`'s app, play the script, stop it: the records."""
    with temp_folder(f"attention_viz-payloads-{name}-") as temp, httpx.Client(timeout=30) as http, \
            Server([sys.executable, "app.py"], LOGS / f"payloads-{name}.log", env=app_env(tree, temp), cwd=tree) as server:
        server.wait_http(http, timeout_s=300)
        time.sleep(5.0)  # the warm-up thread's work out of the way (it fills caches, never answers)
        return asyncio.run(_script(server.base))


def compare(this: list[str], ref: list[str]) -> list[str]:
    """The differences, one line each (none: the same records)."""
    found = [] if len(this) == len(ref) else [f"{len(this)} records against {len(ref)}"]
    for i, (a, b) in enumerate(zip(this, ref)):
        if a != b:
            at = next(k for k, (x, y) in enumerate(zip(a, b)) if x != y) if a[:len(b)] != b[:len(a)] else min(
                len(a), len(b))
            found.append(f"record {i}: differs at character {at}: ...{a[max(0, at - 60):at + 60]!r} against "
                         f"...{b[max(0, at - 60):at + 60]!r}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks payloads", description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the git ref whose app's answers this tree's must equal")
    parser.add_argument("--out", default=None, help="also write both records here (a folder)")
    args = parser.parse_args(argv)
    with temp_folder("attention_viz-ref-") as folder:
        this = record(ROOT, "this")
        commit = export_ref(args.against, folder / "tree")
        ref = record(folder / "tree", "ref")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, records in (("this", this), ("ref", ref)):
            (out / f"payloads-{name}.jsonl").write_text("\n".join(records) + "\n")
    differences = compare(this, ref)
    wrong = [r for r in this if '"wrong": null' not in r and r.startswith('{"action"')]
    size = sum(len(r.encode()) for r in this)
    print(f"{len(this)} records ({size / 1e6:.1f} MB of answers) from {PAGES} pages x {ROUNDS} rounds of "
          f"{len(ACTIONS)} actions: this tree against {args.against} ({commit[:7]}): "
          + ("every answer the same, byte for byte" if not differences else f"{len(differences)} differ"))
    for line in differences[:10]:
        print("  " + line[:400])
    for line in wrong[:5]:
        print("  wrong answer: " + line[:300])
    return 1 if differences or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
