"""Train it yourself, live: one small model trained in the server at a time, its curves and maps streamed.

    live = LiveTrainer(catalog)
    for update in live.run(task="reverse", d_k="512", arm="dot", cancelled=event):   # a generator
        ...   # {"state": "waiting", "place": 2, "message"} while others train, then
              # {"state": "training" | "done" | "stopped" | "cancelled", "message", "view"}

The model is the compatibility study's (docs/study.md): one layer, one head, d_model 32, strings of up to 8
characters, queries and keys of unit-variance components at step 0 (footnote 4's premise), so that plain dot
products meet the saturation the paper warns of at large d_k. The run records every map of five probe strings
at log-spaced steps (train.snapshots.SnapshotRecorder) and each update carries the view so far in
service.training_view's format (one arm), which the page draws with the same training.js.

One run trains at a time across all users: the others wait in line (first come, first served) and are told
their place; a full line refuses a newcomer. A run stops at LIVE_STEPS or LIVE_SECONDS, whichever comes first,
or when its user cancels (the `cancelled` event, or closing the generator). Training uses one torch thread, so
the other core keeps answering the other views.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Iterator

from attention_viz.service.catalog import Catalog
from attention_viz.service.checks import check_choice
from attention_viz.service.limits import (
    LIVE_ARMS, LIVE_D_KS, LIVE_LINE, LIVE_SECONDS, LIVE_STEPS, LIVE_TASKS, STUDY_ARMS,
)
from attention_viz.service.training_view import arm_data, view_data
from attention_viz.train.snapshots import SnapshotRecorder, log_steps, probe_texts
from attention_viz.train.trainer import TrainSettings, train

WAIT_POLL_S = 1.0  # how often a waiting user hears their place again


class Cancelled(Exception):
    """Raised inside the training loop to stop it (the user cancelled, or the time ran out)."""


def live_settings(task: object, d_k: object, arm: object, steps: int = LIVE_STEPS) -> TrainSettings:
    """The study's recipe for one live run, the user's choices checked (ValueError naming the choices)."""
    task = check_choice("task", task, {t: t for t in LIVE_TASKS})
    d_k = int(check_choice("d_k", str(d_k).strip() if isinstance(d_k, (int, str)) and not isinstance(d_k, bool)
                           else d_k, {str(v): str(v) for v in LIVE_D_KS}))
    arm = check_choice("compatibility function", arm, dict(LIVE_ARMS))
    return TrainSettings(
        task=task, scale="none" if arm == "dot" else "sqrt_dk", d_k=d_k, d_v=32, d_model=32, n_heads=1, n_layers=1,
        d_ff=128, max_len=8, steps=steps, batch_size=32, lr=2e-3, warmup=50, init="unit_qk",
        compatibility="additive" if arm == "additive" else "dot_product", heldout_size=200, seed=0,
    )


class LiveTrainer:
    """The server's one live training at a time, with a first-come line (share one per server)."""

    def __init__(self, catalog: Catalog, max_line: int = LIVE_LINE, seconds: float = LIVE_SECONDS,
                 steps: int = LIVE_STEPS) -> None:
        self.catalog, self.max_line, self.seconds, self.steps = catalog, max_line, seconds, steps
        self._line: collections.deque = collections.deque()  # tickets, the one training first
        self._cond = threading.Condition()
        self._owners: dict[str, threading.Event] = {}  # who started each run in line -> its cancel switch

    @property
    def waiting(self) -> int:
        """Users in line behind the one training (0 when nobody trains)."""
        with self._cond:
            return max(0, len(self._line) - 1)

    def cancel(self, owner: str) -> bool:
        """Stop `owner`'s run (waiting or training) at its next step; False when they have none."""
        with self._cond:
            event = self._owners.get(owner)
            if event is None:
                return False
            event.set()
            self._cond.notify_all()
            return True

    def run(self, task: object, d_k: object, arm: object, cancelled: threading.Event | None = None,
            owner: str | None = None) -> Iterator[dict]:
        """Wait for a turn (yielding the place in line), then train and yield the view after every snapshot.

        owner: who asks (the app's session), so that cancel(owner) stops this run; one run per owner at a time.
        """
        settings = live_settings(task, d_k, arm, self.steps)  # refused before taking a place in line
        arm = check_choice("compatibility function", arm, dict(LIVE_ARMS))  # its key, as the view names the arm
        cancelled = cancelled or threading.Event()
        ticket = object()
        with self._cond:
            if owner is not None and owner in self._owners:
                raise ValueError("You have a live run already: cancel it or wait for it to finish.")
            if len(self._line) > self.max_line:
                raise ValueError(f"{len(self._line) - 1} people are waiting for a live run already; try again in a "
                                 "minute.")
            self._line.append(ticket)
            if owner is not None:
                self._owners[owner] = cancelled
        handed_over = False  # once training, the worker leaves the line when it stops, not this generator
        try:
            while True:
                with self._cond:
                    place = self._line.index(ticket)
                    if place == 0 or cancelled.is_set():
                        break
                yield {"state": "waiting", "place": place,
                       "message": f"Another live run is training: you are number {place} in line (each run takes "
                                  f"at most {self.seconds:.0f} s)."}
                with self._cond:
                    if self._line.index(ticket) == place:
                        self._cond.wait(WAIT_POLL_S)
            if cancelled.is_set():
                yield {"state": "cancelled", "message": "Cancelled before it started."}
                return
            handed_over = True
            yield from self._train(settings, arm, cancelled, lambda: self._leave(ticket, owner))
        finally:
            if not handed_over:
                self._leave(ticket, owner)

    def _leave(self, ticket: object, owner: str | None) -> None:
        """Take a run out of the line (its training has stopped, or it never started) and wake the next."""
        with self._cond:
            self._line.remove(ticket)
            if owner is not None:
                self._owners.pop(owner, None)
            self._cond.notify_all()

    def _train(self, settings: TrainSettings, arm: str, cancelled: threading.Event, leave) -> Iterator[dict]:
        """Train in a thread of its own; yield the view after each snapshot, then the outcome.

        The worker calls `leave` when it has stopped, so the next run starts only then; closing this generator
        (the user left) only asks the worker to stop and never waits for it on the caller's thread (Gradio closes
        generators on its event loop).
        """
        recorder = SnapshotRecorder(settings, log_steps(settings.steps), probe_texts(settings.max_len))
        updates: queue.Queue = queue.Queue()
        started = time.perf_counter()
        rng_lock = self.catalog.rng_lock
        outcome: dict = {}
        held = []  # [True] while this run holds rng_lock
        reached = [0]  # the last step trained

        def observe(step: int, model, batch) -> None:
            reached[0] = step
            if held:
                held.pop()
                rng_lock.release()  # the model is built: the global generator is free again
            if cancelled.is_set():
                raise Cancelled("cancelled")
            if time.perf_counter() - started > self.seconds:
                raise Cancelled("time")
            before = len(recorder.recorded)
            recorder(step, model, batch)
            if len(recorder.recorded) > before:  # the view is packed here, between steps: never half a snapshot
                updates.put(("snapshot", step, self._view(settings, recorder, arm, None)))

        def work() -> None:
            rng_lock.acquire()  # train() seeds and draws from the global generator while it builds the model
            held.append(True)
            try:
                model, card = train(settings, device="cpu", progress=False, observe=observe)
                outcome.update(state="done", heldout=card["heldout_exact_match"], seconds=card["train_seconds"])
            except Cancelled as stop:
                outcome.update(state="cancelled" if str(stop) == "cancelled" else "stopped")
            except Exception as error:  # noqa: BLE001 - reported to the user as a failed run, never raised
                outcome.update(state="failed", error=type(error).__name__)
            finally:
                if held:
                    held.pop()
                    rng_lock.release()  # failed before step 0
                updates.put(("end", None, None))
                leave()

        last_view = None
        worker = threading.Thread(target=work, name="live-training", daemon=True)
        worker.start()
        try:
            while True:
                what, step, view = updates.get()
                if what == "end":
                    break
                last_view = view
                yield {"state": "training", "message": f"Training: step {step} of {settings.steps}, "
                                                       f"{time.perf_counter() - started:.0f} s.", "view": view}
        finally:
            cancelled.set()  # done, or the generator was closed (the user left): the loop stops at its next step
        done = reached[0]
        state = outcome.get("state", "failed")
        messages = {
            "done": f"Done: {settings.steps} steps in {outcome.get('seconds', 0):.0f} s; held out, "
                    f"{100 * outcome.get('heldout', 0):.0f}% of 200 strings exact.",
            "stopped": f"Stopped at the {self.seconds:.0f} s limit after step {done} of {settings.steps}.",
            "cancelled": f"Cancelled after step {done} of {settings.steps}.",
            "failed": "The run failed and was stopped; the other views are unaffected.",
        }
        view = last_view
        if view is not None:
            arm_view = view["arms"][0]
            if state == "done":
                arm_view["heldout_exact_match"] = outcome.get("heldout")
            else:
                arm_view["status"] = f"{state} after step {done}: no held-out score"
        yield {"state": state, "message": messages[state], "view": view}

    def _view(self, settings: TrainSettings, recorder: SnapshotRecorder, arm: str, heldout: float | None) -> dict:
        meta = recorder.meta()
        packed = arm_data(arm, STUDY_ARMS[arm], "live run", meta, recorder.quantised(), heldout)
        return view_data(meta, list(recorder.maps), [packed], settings.d_k, list(LIVE_D_KS), settings.steps)
