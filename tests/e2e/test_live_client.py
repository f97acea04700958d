"""Training live through gradio_client, as several users at once: one trains, the next hears its place in line,
the other views keep answering, and Cancel stops a run whose stream then says where it stopped."""

import time

import pytest
from gradio_client import Client

TIMEOUT_S = 60
RUN = dict(task="reverse", d_k="8", compatibility="scaled_dot", api_name="/live_train")


def wait_for(job, predicate, timeout=TIMEOUT_S):
    """The job's outputs once `predicate(outputs)` holds (polling; fails after `timeout`)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        outputs = job.outputs()
        if predicate(outputs):
            return outputs
        time.sleep(0.1)
    pytest.fail(f"no such outputs within {timeout} s: {[o[1] for o in job.outputs()]}")


def test_one_live_run_at_a_time_the_others_wait_and_views_answer(app_url):
    first, second, other = (Client(app_url, verbose=False) for _ in range(3))
    job = first.submit(**RUN)
    outputs = wait_for(job, lambda o: len(o) >= 2 and o[-1][1].startswith("Training"))
    view = outputs[-1][0]
    assert view["format"] == "attention_viz.training/1" and len(view["arms"]) == 1 and view["total_steps"] == 600

    queued = second.submit(**RUN)
    line = wait_for(queued, lambda o: len(o) >= 1)
    assert "you are number 1 in line" in line[0][1]

    run, output, notes = other.predict(text="abc", model="reverse/sqrt_dk", api_name="/visualize")  # answers now
    assert output == "cba" and not job.done()

    assert second.predict(api_name="/live_cancel") == "Cancel asked: your run stops at its next step."
    assert queued.result(timeout=TIMEOUT_S)[1] == "Cancelled before it started."
    assert other.predict(api_name="/live_cancel") == "No live run of yours to cancel."
    assert first.predict(api_name="/live_cancel") == "Cancel asked: your run stops at its next step."
    view, message = job.result(timeout=TIMEOUT_S)
    assert message.startswith("Cancelled after step") and view["steps"][-1] < 600


def test_a_refused_choice_says_why(app_url):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="d_k must be one of '8', '32', '128', '512', '1024'"):
        Client(app_url, verbose=False).predict(task="reverse", d_k="64", compatibility="dot", api_name="/live_train")
