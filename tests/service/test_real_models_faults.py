"""Real models can never stall the server: the run line is a leaf that refuses to be taken twice, a load or a
download holds no lock that serves loaded models, waits are bounded, refusals are remembered (network ones tried
again later), and two folders with one name are both offered."""

from __future__ import annotations

import os
import threading
import time

import pytest

pytest.importorskip("transformers")

from attention_viz.service.catalog import Catalog  # noqa: E402
from attention_viz.service.real_models import RealModels, RunLine, configured, display_names  # noqa: E402
from attention_viz.service.runs import Runs  # noqa: E402
from attention_viz.service.views import Views  # noqa: E402
from devtools.hub_models import save_tiny  # noqa: E402


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    return save_tiny("marian", tmp_path_factory.mktemp("faults") / "tiny-marian")


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def within(seconds: float, fn, *args):
    """fn(*args) on a thread of its own; its result, or a failure (not a hang) when it has not ended in time."""
    out: dict = {}

    def call():
        try:
            out["value"] = fn(*args)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            out["error"] = error

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{getattr(fn, '__name__', fn)} did not end within {seconds} s (a deadlock?)"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_mean_ablation_after_its_means_left_their_cache_does_not_deadlock(marian, offline, one_thread):
    """The sequence a class reaches: a real run with heads off by mean ablation is cached, its means leave their
    cache (others used mean ablation 16 times), and the run is drawn again: what flows needs the means again."""
    views = Views(Runs(Catalog(hub_models=[str(marian)])))
    settings = views.runs.settings("the cat sat", "hub:tiny-marian", 64, "sqrt_dk", 1.0, True, True, 0, 64, 4,
                                   heads_off="encoder.0.self_attn: 0", ablation="mean")
    run = within(120, views.runs.run, settings)
    views.runs._means.cache_clear()  # the means evicted, the run still cached
    norms = within(60, views.runs.value_norms, run)
    assert norms and all(value.shape[0] == 4 for value in norms.values())
    assert within(60, views.visualize, settings).run["output"] == run.output
    assert not views.runs.catalog.real.line("hub:tiny-marian").locked()


def test_each_real_model_has_its_own_run_line(marian, tmp_path, offline, one_thread):
    """A model busy with a long piece of work (its line held) does not hold another model's run back; its own next
    run waits for it."""
    gpt2 = save_tiny("gpt2", tmp_path / "tiny-gpt2")
    views = Views(Runs(Catalog(hub_models=[str(marian), str(gpt2)])))
    real = views.runs.catalog.real
    assert real.line("hub:tiny-marian") is not real.line("hub:tiny-gpt2")
    held, release = threading.Event(), threading.Event()

    def busy_marian():
        with real.line("hub:tiny-marian"):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=busy_marian, daemon=True)
    thread.start()
    assert held.wait(30)
    try:
        settings = views.runs.settings("hello world", "hub:tiny-gpt2", 64)
        assert within(10, views.runs.run, settings).output is not None  # the other model answers meanwhile
        marian_run = threading.Thread(target=views.runs.run,
                                      args=(views.runs.settings("the cat sat", "hub:tiny-marian", 64),), daemon=True)
        marian_run.start()
        marian_run.join(1.0)
        assert marian_run.is_alive()  # the busy model's own run waits for its line
    finally:
        release.set()
    marian_run.join(60)
    assert not marian_run.is_alive()


def test_the_run_line_refuses_to_be_taken_twice_by_one_thread_and_bounds_a_wait():
    line = RunLine(wait_s=0.2)
    with line:
        with pytest.raises(RuntimeError, match="taken twice by one thread"):
            with line:
                pass
        waited = {}

        def other():
            began = time.monotonic()
            try:
                with line:
                    pass
            except ValueError as error:
                waited["message"], waited["s"] = str(error), time.monotonic() - began

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(5)
    assert "busy with other visitors' work" in waited["message"] and waited["s"] < 2
    with line:  # free again once left, the refusal changed nothing
        pass


def test_a_load_holds_no_lock_that_serves_loaded_models(marian, offline, monkeypatch):
    """One model still loading (a slow download) keeps no visitor of an already loaded model waiting, and its own
    visitors hear that it is still loading after load_wait_s, then get it once it is there."""
    real = RealModels([str(marian), "someone/slow"], load_wait_s=0.5)
    release = threading.Event()
    original = RealModels._load

    def load(self, name, progress=None):
        if name == "someone/slow":
            progress(0.5, "Downloading someone/slow: 1 of 2 files")
            release.wait(30)
            return original(self, str(marian), progress)
        return original(self, name, progress)

    monkeypatch.setattr(RealModels, "_load", load)
    loaded = real.get("hub:tiny-marian")
    heard = []
    began = time.monotonic()
    with pytest.raises(ValueError, match=r"still loading \(Downloading someone/slow: 1 of 2 files\): try again"):
        real.get("hub:someone/slow", progress=lambda fraction, text: heard.append((fraction, text)))
    assert time.monotonic() - began < 10 and heard == [(0.5, "Downloading someone/slow: 1 of 2 files")]
    assert real.states()["someone/slow"] == "loading"
    assert within(10, real.get, "hub:tiny-marian") is loaded  # served while the other loads (it waits 30 s)
    assert within(10, real.shape, "hub:tiny-marian").family == "Marian"
    release.set()
    assert within(60, real.get, "hub:someone/slow") is not loaded
    assert real.states() == {"tiny-marian": "loaded", "someone/slow": "loaded"}


def test_a_broken_folder_is_refused_once_and_remembered(tmp_path, offline, monkeypatch):
    broken = tmp_path / "broken-bert"
    broken.mkdir()
    (broken / "config.json").write_text("{ not json")
    (broken / "model.safetensors").write_bytes(b"\x00" * 10)
    real = RealModels([str(broken)])
    calls, original = [], RealModels._load
    monkeypatch.setattr(RealModels, "_load",
                        lambda self, name, progress=None: calls.append(name) or original(self, name, progress))
    messages = []
    for _ in range(3):
        with pytest.raises(ValueError) as refused:
            within(60, real.get, "hub:broken-bert")
        messages.append(str(refused.value))
    assert len(calls) == 1 and len(set(messages)) == 1
    assert "broken-bert" in messages[0] and str(tmp_path) not in messages[0]
    assert "Traceback" not in messages[0] and real.states() == {"broken-bert": "refused"}


def test_a_model_that_could_not_be_downloaded_is_tried_again_later(monkeypatch):
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    attempts = []

    def no_network(*args, **kwargs):
        attempts.append(1)
        raise OSError("no route to host")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_network)
    real = RealModels(["someone/unreachable"], retry_after_s=0.3)
    for _ in range(2):
        with pytest.raises(ValueError, match="is not in this machine.s Hugging Face cache and could not be downloaded"):
            real.get("hub:someone/unreachable")
    assert len(attempts) == 1  # remembered ...
    time.sleep(0.4)
    with pytest.raises(ValueError, match="is not in this machine.s Hugging Face cache and could not be downloaded"):
        real.get("hub:someone/unreachable")
    assert len(attempts) == 2  # ... and tried again once the wait has passed


def test_two_folders_with_one_name_are_both_offered_and_told_apart(tmp_path, marian, offline):
    other = save_tiny("gpt2", tmp_path / "a" / "tiny-marian")  # another model, in a folder of the same name
    names = display_names([str(marian), str(other), str(marian)])
    assert list(names) == ["tiny-marian", "tiny-marian (2)"] and names["tiny-marian (2)"] == str(other)
    real = RealModels([str(marian), str(other)])
    assert real.keys == ["hub:tiny-marian", "hub:tiny-marian (2)"]
    assert real.shape("hub:tiny-marian").family == "Marian"
    assert real.shape("hub:tiny-marian (2)").family == "GPT-2"
    assert all(str(tmp_path) not in real.label(key) for key in real.keys)


def test_a_space_offers_the_papers_task_without_any_setting(monkeypatch):
    monkeypatch.delenv("ATTENTION_VIZ_HUB_MODELS", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert configured() == []  # locally nothing is fetched unless named
    monkeypatch.setenv("SPACE_ID", "someone/attention_viz")
    assert configured() == ["Helsinki-NLP/opus-mt-en-de", "HuggingFaceTB/SmolLM2-135M", "facebook/dinov2-small",
                            "openai/whisper-tiny"]
    monkeypatch.setenv("ATTENTION_VIZ_HUB_MODELS", "")
    assert configured() == []  # set, even empty, the operator's word wins
    monkeypatch.setenv("ATTENTION_VIZ_HUB_MODELS", "gpt2")
    assert configured() == ["gpt2"]


def test_the_lesson_s_real_steps_are_warmed_at_start_on_a_space_or_when_the_set_up_says_so():
    from attention_viz.service.real_models import warms_real_steps

    assert not warms_real_steps({}) and warms_real_steps({"SPACE_ID": "someone/attention_viz"})  # a Space preloads
    assert warms_real_steps({"ATTENTION_VIZ_WARM_REAL": "1"})
    assert not warms_real_steps({"ATTENTION_VIZ_WARM_REAL": "0", "SPACE_ID": "someone/attention_viz"})
    with pytest.raises(ValueError, match="ATTENTION_VIZ_WARM_REAL must be 1 or 0, got 'yes'"):
        warms_real_steps({"ATTENTION_VIZ_WARM_REAL": "yes"})


def test_a_space_without_its_model_cached_refuses_it_cleanly_and_serves_the_rest(monkeypatch, offline, one_thread):
    monkeypatch.delenv("ATTENTION_VIZ_HUB_MODELS", raising=False)
    monkeypatch.setenv("SPACE_ID", "someone/attention_viz")
    monkeypatch.setenv("HF_HOME", os.devnull + "-nothing-cached")
    views = Views(Runs(Catalog()))
    assert views.runs.catalog.real.keys == ["hub:Helsinki-NLP/opus-mt-en-de", "hub:HuggingFaceTB/SmolLM2-135M",
                                            "hub:facebook/dinov2-small", "hub:openai/whisper-tiny"]
    with pytest.raises(ValueError, match="opus-mt-en-de. is not in this machine.s Hugging Face cache"):
        within(60, views.runs.settings, "hello", "hub:Helsinki-NLP/opus-mt-en-de", 64)
    assert views.visualize(views.runs.settings("hello", "reverse/sqrt_dk", 16)).run["output"] == "olleh"
