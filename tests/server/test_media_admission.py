"""The Pictures and sound tab's events in the app's queue (page.build_app, not started: nothing runs): every one
names its model, so each waits on that real model's own line, and one address holds at most that line's share
(server/admission.py), a class's uploads in turn as its texts are."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

from gradio.data_classes import PredictBodyInternal  # noqa: E402

from attention_viz.server.admission import REAL_RUNS, real_line  # noqa: E402
from attention_viz.service.real_models import RealModels  # noqa: E402
from attention_viz.service.views import Views  # noqa: E402
from attention_viz.webui import page  # noqa: E402
from devtools.hub_models import save_tiny_image  # noqa: E402
from tests.server.test_admission import joins, line_of_event  # noqa: E402

MEDIA = "hub:tiny-deit"


@pytest.fixture(scope="module")
def deit(tmp_path_factory):
    return str(save_tiny_image("deit", tmp_path_factory.mktemp("media-admission") / "tiny-deit"))


@pytest.fixture()
def app(runs, deit, monkeypatch):
    monkeypatch.setattr(runs.catalog, "real", RealModels([deit]))
    demo = page.build_app(Views(runs))
    return SimpleNamespace(demo=demo, queue=demo._queue, fns=list(demo.fns.values()))


def media_body(fn, session: str) -> PredictBodyInternal:
    data = [MEDIA if getattr(block, "elem_id", None) == "media_model" else getattr(block, "value", None)
            for block in fn.inputs]
    return PredictBodyInternal(data=data, fn_index=fn._id, session_hash=session, event_data=None, trigger_id=None)


def test_every_event_of_the_tab_waits_on_its_models_own_line_and_one_address_holds_its_share(app):
    media = [fn for fn in app.fns if any(getattr(b, "elem_id", None) == "media_model" for b in fn.inputs)]
    assert {fn.api_name for fn in media} >= {"media_view", "media_model"} and len(media) >= 10  # the triggers too
    answers = joins(app.queue, *[(media_body(fn, f"page{i}"), f"10.0.2.{i}") for i, fn in enumerate(media)])
    assert all(ok for ok, _, _ in answers)
    assert {line_of_event(app.queue, event_id) for _, event_id, _ in answers} == {real_line(MEDIA).id}
    view = next(fn for fn in media if fn.api_name == "media_view")
    flood = joins(app.queue, *[(media_body(view, f"s{i}"), "10.0.3.1") for i in range(REAL_RUNS.per_address + 2)])
    assert [ok for ok, _, _ in flood] == [True] * REAL_RUNS.per_address + [False] * 2
    assert flood[-1][1].startswith("Queue is full for this address on the real models line")
