"""Training live: one run at a time with a line, streamed views, cancel, the time limit, and the shared generator."""

import threading
import time

import pytest

from attention_viz.service.catalog import Catalog
from attention_viz.service.live import LiveTrainer, live_settings
from attention_viz.service.training_view import FORMAT
from attention_viz.train.snapshots import log_steps


def wait_idle(live, timeout=30):
    """Until nobody is in line (a stopped run's worker leaves the line itself, just after its stream ends)."""
    deadline = time.monotonic() + timeout
    while live._line:
        assert time.monotonic() < deadline, "a run never left the line"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def catalog():
    return Catalog()


@pytest.mark.parametrize("task, d_k, arm, message", [
    ("dates-x", "8", "dot", "task must be one of"),
    ("reverse", "64", "dot", "d_k must be one of '8', '32', '128', '512', '1024'"),
    ("reverse", True, "dot", "d_k must be one of"),
    ("reverse", "8", "bilinear", "compatibility function must be one of 'scaled_dot', 'dot', 'additive'"),
])
def test_choices_are_checked_before_anything_runs(catalog, task, d_k, arm, message):
    live = LiveTrainer(catalog)
    with pytest.raises(ValueError, match=message):
        next(live.run(task, d_k, arm))
    assert live.waiting == 0 and not catalog.rng_lock.locked()


def test_settings_follow_the_study_recipe():
    s = live_settings("sort", "512", "dot")
    assert (s.task, s.d_k, s.scale, s.compatibility, s.n_heads, s.n_layers, s.init) == (
        "sort", 512, "none", "dot_product", 1, 1, "unit_qk")
    assert live_settings("copy", 8, "additive").compatibility == "additive"
    assert live_settings("copy", 8, "scaled_dot").scale == "sqrt_dk"


def test_a_short_run_streams_its_snapshots_then_its_outcome(catalog, one_thread):
    updates = list(LiveTrainer(catalog, steps=30).run("reverse", "8", "scaled_dot"))
    training, last = updates[:-1], updates[-1]
    assert [u["state"] for u in training] == ["training"] * len(log_steps(30))
    steps = [u["view"]["steps"][-1] for u in training]
    assert steps == log_steps(30)
    view = last["view"]
    assert last["state"] == "done" and last["message"].startswith("Done: 30 steps")
    assert view["format"] == FORMAT and view["total_steps"] == 30 and len(view["arms"]) == 1
    arm = view["arms"][0]
    assert arm["arm"] == "scaled_dot" and 0 <= arm["heldout_exact_match"] <= 1
    assert len(arm["alignment"]) == len(view["steps"]) == len(arm["train"]["loss"])
    assert arm["train"]["loss"][0] is None and arm["train"]["loss"][-1] > 0
    assert not catalog.rng_lock.locked()


def test_cancel_stops_a_run_at_its_next_step(catalog, one_thread):
    live = LiveTrainer(catalog, steps=5000)
    run = live.run("reverse", "8", "dot", owner="me")
    first = next(run)
    assert first["state"] == "training"
    assert live.cancel("me") and not live.cancel("someone else")
    rest = list(run)
    assert rest[-1]["state"] == "cancelled" and rest[-1]["message"].startswith("Cancelled after step")
    assert rest[-1]["view"]["steps"][-1] < 5000
    stopped_at = int(rest[-1]["message"].split("step ")[1].split(" ")[0])
    assert stopped_at >= rest[-1]["view"]["steps"][-1]  # the last step trained, at or past the last snapshot
    wait_idle(live)
    assert not live.cancel("me") and live.waiting == 0 and not catalog.rng_lock.locked()


def test_the_time_limit_stops_a_run(catalog, one_thread):
    last = list(LiveTrainer(catalog, seconds=0.5, steps=5000).run("copy", "8", "scaled_dot"))[-1]
    assert last["state"] == "stopped" and "0 s limit after step" in last["message"]


def test_one_run_at_a_time_the_others_hear_their_place(catalog, one_thread):
    live = LiveTrainer(catalog, max_line=1, steps=5000)
    first = live.run("reverse", "8", "scaled_dot", owner="a")
    assert next(first)["state"] == "training"
    second = live.run("reverse", "8", "scaled_dot", owner="b")
    waiting = next(second)
    assert waiting == {"state": "waiting", "place": 1, "message": waiting["message"]}
    assert "number 1 in line" in waiting["message"]
    with pytest.raises(ValueError, match="1 people are waiting"):
        next(live.run("reverse", "8", "scaled_dot", owner="c"))  # the line holds one
    with pytest.raises(ValueError, match="You have a live run already"):
        next(live.run("reverse", "8", "scaled_dot", owner="a"))
    live.cancel("a")
    assert list(first)[-1]["state"] == "cancelled"
    after = next(second)  # the first left: the second trains now
    assert after["state"] == "training"
    second.close()  # a closed stream (the user left) stops its run too, without waiting for it here
    wait_idle(live)
    assert not catalog.rng_lock.locked()


def test_the_untrained_model_is_the_same_while_a_run_trains(catalog, one_thread):
    """Both seed torch's global generator: builds of the untrained model running beside a live run's set-up must
    still give the seed's weights (catalog.rng_lock keeps them apart)."""
    weights = lambda model: {k: v.clone() for k, v in model.state_dict().items()}  # noqa: E731
    alone = weights(catalog._build_untrained(64, 4, 8))
    stop, built = threading.Event(), []

    def build():
        while not stop.is_set():
            built.append(weights(catalog._build_untrained(64, 4, 8)))

    worker = threading.Thread(target=build)
    worker.start()
    for _ in range(3):
        for _ in LiveTrainer(catalog, steps=5).run("reverse", "32", "scaled_dot"):
            pass
    stop.set()
    worker.join()
    assert len(built) >= 3
    assert all(all(b[k].equal(alone[k]) for k in alone) for b in built)
