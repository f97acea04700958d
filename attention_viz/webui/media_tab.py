"""The Pictures and sound tab (where the server has a real model that reads pictures or recordings): a picture through
an image model, or a recording through Whisper, its views drawn on the server (service.media_view) as images.

The picture or recording arrives as an upload (Gradio's upload route, within launch's max_file_size: a larger file is
refused by the page, naming the limit); the events read it on the model's own line (server/admission.py routes an
event naming a real model there), so a class's uploads are computed one at a time per model, as its texts are.
A refusal (not a picture, damaged, too many pixels, a picture for a speech model) is a message, and nothing on the
page changes.
"""

from __future__ import annotations

import gradio as gr

from collections.abc import Callable

from attention_viz.service import FACTOR_RANGE, SCALE_CHOICES, MediaViews
from attention_viz.webui.handling import handler, named
from attention_viz.webui.widgets import PRIVATE, RAW, prose, prose_html, released

ABOUT = """Attention on **pictures** and **sound**, with the same Eq. 1 as on text. An image model (ViT, DeiT, BEiT,
DINOv2, CLIP's or SigLIP's vision tower) cuts a picture into square patches, each a token, after its special tokens
(the class token, DeiT's distillation token, DINOv2's registers). Whisper hears 30 s of sound as 1,500 tokens of 20 ms
and writes what it hears: its encoder-decoder attention lines each written token up with the time it was said."""
PICTURE_HELP = ("**Click a patch** of the first view to see where it looks, or type a token's number below (0: the "
                "first special token, the class token). Every head of the layer and the rollout follow the same token.")
PICTURE_VIEWS = ("overlay", "heads", "rollout", "specials")
RECORDING_VIEWS = ("alignment", "encoder")
ENCODER_HELP = ("**The encoder's self-attention**, time against time (each position 20 ms of the recording): every "
                "head's summary, the chosen head's whole map, and **a rectangle dragged on it** opens that region's "
                "exact weights, the times on its sides.")


def render(demo: gr.Blocks, media: MediaViews, long_view: Callable[[str], gr.HTML]) -> dict:
    """The tab's widgets and wiring, inside the current gr.Tab (the server has at least one of media.choices());
    long_view(elem_id): the Long text tab's view (long_tab.long_view), for the encoder's self-attention: its
    overviews and regions asked of the page's handlers as a page's are."""
    choices = media.choices()
    first = choices[0][1]
    pictures = media.reads(first) == "pictures"
    layers, heads, d_k = media.shape(first)
    prose(ABOUT)
    with gr.Row():
        model = gr.Dropdown(choices, value=first, label="Model", elem_id="media_model", scale=2, min_width=240)
        scale = gr.Radio([(label, value) for value, label in SCALE_CHOICES.items()], value="sqrt_dk",
                         label="Scaling of q·k", elem_id="media_scale", scale=2)
        factor = gr.Number(1.0, minimum=FACTOR_RANGE[0], maximum=FACTOR_RANGE[1], label="Custom factor",
                           elem_id="media_factor", scale=1, min_width=120)
        d_k_box = gr.Number(d_k, interactive=False, label="d_k: this model's own", elem_id="media_d_k", scale=1,
                            min_width=120)  # its weights fix it, as a real model's on text
    with gr.Row():
        picture = gr.Image(media.sample(), type="filepath", sources=["upload", "clipboard"], visible=pictures,
                           label="A picture: upload your own", elem_id="media_picture",
                           height=260)
        recording = gr.Audio(sources=["upload", "microphone"], type="filepath", visible=not pictures,
                             label="A recording: upload or record", elem_id="media_recording")
    with gr.Row():
        layer = gr.Slider(0, layers - 1, value=layers - 1, step=1, label="Layer", elem_id="media_layer")
        head = gr.Slider(0, heads - 1, value=0, step=1, label="Head", elem_id="media_head")
        query = gr.Number(0, precision=0, minimum=0, label="From token", visible=pictures, elem_id="media_query")
    read = gr.Button("Read it", variant="primary", elem_id="media_read")
    notes = prose("", elem_id="media_notes")
    with gr.Column(visible=pictures) as picture_views:
        prose(PICTURE_HELP)
        with gr.Row():
            overlay = gr.Image(label="The chosen head (click a patch)", interactive=False,
                               elem_id="media_overlay", format="png",  # at its size (448 px), a phone's narrower
                               alt_text="The chosen head's weights from the chosen token over the picture; a click "
                                        "on a patch looks from it")
            rollout = gr.Image(label="Rollout over the layers, from the same token", show_label=False,
                               interactive=False, elem_id="media_rollout", format="png",  # its title says it
                               alt_text="The rollout over every layer from the same token, over the picture")
        heads_grid = gr.Image(label="Every head of the layer", show_label=False, interactive=False,
                              elem_id="media_heads", format="png",
                              alt_text="Every head of the layer from the same token, a panel each over the picture")
        specials = prose("", elem_id="media_specials")
        with gr.Row():
            explore = gr.Button("Every map in the explorer (one HTML file, offline)", elem_id="media_explore",
                                size="sm")
            page_file = gr.File(label="The explorer page", elem_id="media_explorer_file", interactive=False,
                                visible=False)  # shown with its file (an empty file list fails WCAG)
    with gr.Column(visible=not pictures) as recording_views:
        alignment = gr.Image(label="The transcript's alignment: each step's encoder-decoder attention over the sound",
                             show_label=False, interactive=False, elem_id="media_alignment", format="png",
                             alt_text="The spectrogram, and under it each step's encoder-decoder attention over time")
        prose(ENCODER_HELP)
        encoder = long_view("media_encoder")  # the Long text tab's view: regions asked of the kept run
    components = {"overlay": overlay, "heads": heads_grid, "rollout": rollout, "specials": specials,
                  "alignment": alignment, "encoder": encoder, "notes": notes, "query": query, "layer": layer,
                  "head": head}
    toggled = {"picture": picture, "recording": recording, "picture_views": picture_views,
               "recording_views": recording_views, "query": query, "layer": layer, "head": head, "d_k": d_k_box}
    inputs = [model, picture, recording, scale, factor, layer, head, query]
    handlers = MediaHandlers(media)  # the tab's own (the page's answer the long view, above)
    show = named(handler(handlers.view), components)
    for trigger in (read.click, picture.upload, recording.upload, recording.stop_recording, released(layer).change,
                    released(head).change, query.submit, scale.input, factor.submit):
        trigger(show, inputs, list(components.values()), api_name="media_view" if trigger == read.click else None,
                **RAW, **({} if trigger == read.click else PRIVATE))
    overlay.select(named(handler(handlers.clicked), components), inputs, list(components.values()),
                   **RAW, **PRIVATE)
    explore.click(handler(handlers.explorer), [model, picture, scale, factor], page_file,
                  api_name="media_explorer", **RAW)
    model.input(named(handler(handlers.switch), toggled), model, list(toggled.values()), **RAW,
                api_name="media_model")
    return {**components, **toggled, "model": model, "scale": scale, "factor": factor}


def lesson_state(media: MediaViews, asked: dict) -> dict:
    """A lesson step's state of this tab (service.lesson_media), by the lesson's names ("media_" + this tab's): the
    model and its input in sight, the picture, the controls, and the views the step's numbers come from."""
    pictures = media.reads(asked["model"]) == "pictures"
    handlers = MediaHandlers(media)
    state = {**handlers.switch(asked["model"]), **handlers.shown(asked["model"], asked["answer"]),
             "model": asked["model"], "picture": asked["picture"], "scale": asked["scale"],
             "layer": gr.update(maximum=media.shape(asked["model"])[0] - 1, value=asked["layer"]),
             "head": gr.update(maximum=media.shape(asked["model"])[1] - 1, value=asked["head"]),
             "query": gr.update(visible=pictures, value=asked["query"])}
    return {f"media_{name}": value for name, value in state.items()}


class MediaHandlers:
    """The tab's widget values -> service.media_view calls; its answers by component name."""

    def __init__(self, media: MediaViews) -> None:
        self.media = media

    def view(self, model, picture, recording, scale, factor, layer, head, query) -> dict:
        """The views of the picture (an image model) or the recording (a speech model) at these settings."""
        reads = self.media.reads(model)
        upload = picture if reads == "pictures" else recording
        answer = self.media.view(model, path_of(upload), scale, factor, layer, head, query)
        return self.shown(model, answer)

    def explorer(self, model, picture, scale, factor, request: gr.Request = None):
        """The picture's run as the explorer's one HTML file (counted against the page's session), in sight."""
        paths = self.media.explorer(model, path_of(picture), scale, factor, getattr(request, "session_hash", None))
        return gr.update(value=paths, visible=True)

    def clicked(self, model, picture, recording, scale, factor, layer, head, query, event: gr.SelectData) -> dict:
        """A click on the overlay: the views from the patch under it."""
        index = event.index if isinstance(event.index, (list, tuple)) and len(event.index) == 2 else (None, None)
        return self.view(model, picture, recording, scale, factor, layer, head,
                         self.media.query_at(model, *index))

    def switch(self, model) -> dict:
        """Another model: its input and its views in sight, the sliders' ranges its own."""
        pictures = self.media.reads(model) == "pictures"
        layers, heads, d_k = self.media.shape(model)
        return {"d_k": d_k, "picture": gr.update(visible=pictures), "recording": gr.update(visible=not pictures),
                "picture_views": gr.update(visible=pictures), "recording_views": gr.update(visible=not pictures),
                "query": gr.update(visible=pictures, value=0),
                "layer": gr.update(maximum=layers - 1, value=layers - 1), "head": gr.update(maximum=heads - 1, value=0)}

    def shown(self, model, answer: dict) -> dict:
        layers, heads, _ = self.media.shape(model)
        shown = {name: value for name, value in answer.items() if name in (*PICTURE_VIEWS, *RECORDING_VIEWS)}
        for name in ("specials", "notes"):
            if name in shown or name in answer:
                shown[name] = prose_html(answer[name])
        if "query" in answer:
            shown["query"] = answer["query"]
        return {**shown, "layer": gr.update(maximum=layers - 1), "head": gr.update(maximum=heads - 1)}


def path_of(upload) -> str | None:
    """The server's copy of an upload (Gradio's FileData, as an event without preprocessing gets it), else None."""
    if isinstance(upload, dict):
        path = upload.get("path")
        return path if isinstance(path, str) else None
    return None
