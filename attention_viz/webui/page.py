"""The page: an intro and the tabs, each a module of its own; the queue; the server's start (server/ operates it).

    python app.py    (http://127.0.0.1:7860; host and port from GRADIO_SERVER_NAME / GRADIO_SERVER_PORT)
"""

from __future__ import annotations

import threading

import gradio as gr

from attention_viz.service import (LAB_D_K, LAB_KEYS, MEDIA_UPLOAD_BYTES, Lesson, Runs, Views,
                                   warms_real_steps)
from attention_viz.server import admission, runtime, sessions
from attention_viz.server.answers import Blocks, quick_root_urls
from attention_viz.server.gradio_internals import (keep_idle_connections, keep_no_analytics, read_signatures_once,
                                                   wake_on_events)
from attention_viz.server.http import server_app_kwargs
from attention_viz.server.routes import check_logins_at_once, keep_route_matches
from attention_viz.server.static import files_first
from attention_viz.webui import (lab_tab, lesson_panel, long_tab, media_tab, scripts, theme, training_tab,
                                 transformer_tab)
from attention_viz.webui.handlers import Handlers, opening_settings, ping
from attention_viz.webui.widgets import prose

QUEUE_SIZE = 1024          # a lecture hall of 300 with an event or two each waiting; one page holds at most
                           # admission.PER_PAGE of them and one address admission.PER_ADDRESS, so no client fills
                           # the line for the others
WAKE_MOST_S = 0.1          # the queue's dispatcher sleeps until a join or an event's end wakes it, this long at
                           # most (Gradio polls every 1 ms: ~4 % of a core for an idle server)
PROGRESS_S = 0.1           # a running event's progress is sent this often at most (Gradio: 0.01 s)
STATUS_EVERY_S = 1.0       # waiting pages hear their place this often; Gradio's "auto" told every waiting page at
                           # each event's start: a line of n cost n messages per event, n² in all
IDLE_CONNECTION_S = 75.0   # an idle kept-alive connection is closed by the server after this (uvicorn: 5 s), longer
                           # than a client or reverse proxy keeps one idle (aiohttp 15 s, nginx and load balancers
                           # 60 s): the client closes first, so it never sends on a connection the server is closing
CONCURRENCY = 1            # per event listener: one compare (or export...) at a time; the cores are shared (the runs
                           # and steps, the lesson, scores, real models and live training have lines of their own:
                           # server/admission.py)

INTRO = """# attention_viz: every attention map of *Attention Is All You Need*
Every layer and head of the three attentions of §3.2.3, live. New here? Open **the guided lesson** below.
"""
MORE = """A small Transformer trained to reverse, copy or sort characters, or to write a date in words as `2026-11-22`,
and real models where this server has them. Change **d_k**, switch the **1/√d_k scaling** and the **masks** and watch
the maps and the output change, or play the decode one character at a time. The **√d_k lab** shows why the paper
scales (footnote 4); **Training** shows the heads form, or not, without it.
"""


def build_app(views: Views | None = None) -> gr.Blocks:
    """The app's Blocks, queued. The page holds its first run (the opening text on the default model), so it
    opens complete with no request; every later run comes from /visualize."""
    views = views or Views(Runs())
    handlers = Handlers(views)
    # The views' own files, the PNGs (written once, content-named) and the exports (bounded: service/exports.py),
    # are served from where they are, not copied into Gradio's cache on every answer.
    gr.set_static_paths([views.export_root])
    # delete_cache: every hour, drop what Gradio cached more than an hour ago.
    with Blocks(title="attention_viz", delete_cache=(3600, 3600)) as demo:  # optional trailing inputs
        prose(INTRO)
        with gr.Accordion("More about this app", open=False, elem_id="more"):  # the first screen is the maps'
            prose(MORE)
        lesson = lesson_panel.render() if Lesson.available(views) else None
        with gr.Tabs(overflow_behavior="wrap") as tabs:  # every tab named at once (no "⋯" menu), also on a phone
            with gr.Tab("Transformer", id="transformer"):
                transformer = transformer_tab.render(demo, handlers, views)
            with gr.Tab("√d_k lab", id="lab"):
                lab = lab_tab.render(demo, handlers, views)
            with gr.Tab("Training", id="training") as training_page:
                training = training_tab.render(demo, handlers, views, training_page)
            long_choices = long_tab.choices_of(views)  # a page read by a real model: where the server has one
            long = None
            if long_choices:
                with gr.Tab("Long text", id="long"):
                    long = long_tab.render(demo, handlers, views, long_choices)
            media = None
            if takes_uploads(views):  # pictures and recordings: where the server has a model that reads them
                with gr.Tab("Pictures and sound", id="media"):
                    media = media_tab.render(demo, views.media, lambda elem_id: long_tab.long_view(handlers, elem_id))
        if lesson is not None:
            lesson_panel.wire(handlers, lesson, tabs, transformer, lab, training, long, media)
        gr.api(ping, api_name="ping")  # the protocol's own cost, for benchmarks/app.py's floor
    # A bounded line of waiting events, served one at a time per listener; a waiting page shows its place and an
    # estimate ("queue: 12/40 | 1.1/4.3s"), told as it joins and then every STATUS_EVERY_S; past QUEUE_SIZE,
    # clients hear "Queue is full". Each join passes admission.py: its line by the model it names, a client's
    # share of the queue, its turn in the line; api_open=False: no queued event runs past it (Gradio would run a
    # direct POST /gradio_api/run/<name> at once, on no line; it answers 404 and says to join the queue instead).
    demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=CONCURRENCY, status_update_rate=STATUS_EVERY_S,
               api_open=False)
    pickers = (transformer["model"], lab["own_model"], *((media["model"],) if media else ()))
    admission.install(demo, *pickers, real=views.runs.catalog.real.keys)
    wake_on_events(demo, WAKE_MOST_S, PROGRESS_S)
    return demo


def main() -> None:
    """Start the server: host and port from GRADIO_SERVER_NAME / GRADIO_SERVER_PORT (default 127.0.0.1:7860)."""
    runtime.tune_process()
    warm_real = warms_real_steps()  # the set-up read before anything starts (a wrong value stops here, saying why)
    views = Views(Runs())
    demo = build_app(views)
    runtime.freeze_start_up_objects()
    launch(demo, views)
    # Once the server answers: the other tabs' figures (steps, compare, the family's curves), the lab's numbers and
    # the lesson's steps, while the first visitor looks at the first view. Before launch they would slow the start
    # by seconds.
    # The lesson's real steps too where the set-up says so (real_models.warms_real_steps: on a Space by default).
    threading.Thread(target=warm_up, args=(views, warm_real), name="warm-up", daemon=True).start()
    previous = runtime.stop_on_sigterm()  # a container's stop ends the server as Ctrl+C does, and then:
    try:
        demo.block_thread()
    finally:
        views.exports.close()  # the export folder goes with the server (one a killed server left: ExportFolder)
        runtime.restore_sigterm(previous)


def warm_up(views: Views, real: bool = False) -> None:
    """What the first visitors would otherwise pay for: every renderer once (Views.warm_up), then the lesson's steps on
    our models (Lesson.warm_up: ~1 s of one core, the heads step's scores most of it) and, with `real`, its real
    steps (loading the real models they name, and scoring them: seconds to minutes, in this background thread)."""
    views.warm_up(opening_settings(views), LAB_D_K, LAB_KEYS)
    if Lesson.available(views):
        Lesson(views).warm_up(real=real)


def takes_uploads(views: Views) -> bool:
    """Whether the server takes uploads: where it has a real model that reads pictures or recordings."""
    return bool(views.runs.catalog.real.media_keys)


def launch(demo: gr.Blocks, views: Views) -> None:
    """Start serving `demo` (build_app's) without blocking, as main() does."""
    # Each session's first event shares the page's config instead of rebuilding it, and keeps no values.
    sessions.share_session_configs(demo)
    # show_error=False: no internal text reaches users; max_file_size: 0 (the app takes no uploads, so it stores
    # none) unless the server has a model that reads pictures or recordings (MEDIA_UPLOAD_BYTES each); share=False: never a public tunnel, whatever GRADIO_SHARE says.
    # state_session_capacity: the sessions Gradio keeps, a bounded few (server/sessions.py).
    # app_kwargs: the body limit, the page compressed, /healthz, unknown endpoints answered 404 (server/http.py);
    # then Gradio's own front-end files answered from memory after their first answer (server/static.py).
    # theme and css: contrast and focus that pass WCAG 2.1 AA (webui/theme.py); the lesson's bar (lesson_panel.py).
    # head: the views' scripts and page.js, once per page (webui/scripts.py).
    # enable_monitoring=False: no /monitoring page (it printed its key to the log, and its summary was anyone's to
    # read), and so no record of each event and no summary of them after each (server/gradio_internals.py,
    # keep_no_analytics).
    uploads = MEDIA_UPLOAD_BYTES if takes_uploads(views) else 0
    app, _, _ = demo.launch(show_error=False, max_file_size=uploads, share=False, footer_links=["api"],
                            enable_monitoring=False, prevent_thread_lock=True, state_session_capacity=sessions.SESSIONS_KEPT,
                            app_kwargs=server_app_kwargs(views.runs.catalog, uploads), theme=theme.THEME,
                            css=theme.CSS + lesson_panel.CSS,
                            head=scripts.head())
    keep_no_analytics(demo)
    read_signatures_once()  # each gr.update's new component: its class's signatures and server functions read once
    quick_root_urls()  # an answer with no file copied in one quick pass, not walked for files' URLs (server/answers.py)
    if app is not None:  # None where Gradio's reload mode launched it already
        keep_idle_connections(demo, IDLE_CONNECTION_S)  # longer than a proxy's or a browser's (gradio_internals)
        files_first(app)
        keep_route_matches(app)  # a path's route found once, not by trying Gradio's routes in turn each request
        check_logins_at_once(app)  # no login: nothing to check, in no worker thread
