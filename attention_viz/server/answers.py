"""The app's gr.Blocks: how an event's values come in and its answer goes out, as Gradio does, at less cost.

- Optional trailing inputs: an API client written before an input was added may leave it out (`Blocks.optional`).
- An output left as it is (gr.skip(), or not named in a dict of components) is answered at once as Gradio answers it.
- A gr.update of a component is answered as Gradio answers it, but the component it makes in the session is built
  once for every session that gets the same update (server/sessions.py's `updated`).
- A value of a component whose postprocess only passes it on (INLINE: gr.HTML, gr.Textbox, ...) is postprocessed on
  the event loop, and, where it holds no file, sent as it is: Gradio would walk it for files to move into its cache.
- `quick_root_urls()`: the whole answer's walk for file URLs (processing_utils.add_root_url) copies an answer that
  holds no file in one quick pass instead; the root URL those file URLs start with (route_utils.get_root_url, three
  URL parsings an event) is kept for each request origin it was worked out for.

Every Gradio internal these rely on is named, with its check, in server/gradio_checks.py (REACHES);
tests/server/test_answers.py compares every answer and the session it leaves with Gradio's own.
"""

from __future__ import annotations

import copy
import functools
import json
from types import SimpleNamespace
from typing import Any

import gradio as gr
from gradio import processing_utils, route_utils, utils
from gradio.data_classes import GradioModel, GradioRootModel
from gradio.state_holder import SessionState

from attention_viz.server import sessions

# Components whose postprocess passes a value on (a str, number or bool as it is, or made one): Blocks.postprocess_data
# calls them on the event loop; a subclass that overrides postprocess is not among them
INLINE = frozenset(c.postprocess for c in (gr.HTML, gr.Textbox, gr.Markdown, gr.Number, gr.Checkbox, gr.Slider,
                                           gr.Radio, gr.Dropdown))
GRADIOS_ADD_ROOT_URL = processing_utils.add_root_url  # Gradio's own, before quick_root_urls
GRADIOS_GET_ROOT_URL = route_utils.get_root_url  # Gradio's own, before quick_root_urls
ORIGIN_HEADERS = ("x-forwarded-host", "x-gradio-server", "x-forwarded-proto")  # what it reads of a request, with its url
ROOT_URLS_KEPT = 256  # request origins (url, those headers, route and root path): one, or a few behind proxies


class Blocks(gr.Blocks):
    """gr.Blocks whose events may arrive without their trailing optional inputs (those passed to `optional`,
    added after the API was published): a raw HTTP client written before them still works, and each missing one
    is None, as gradio_client sends it (its handler's default). A request short of any other input is refused
    with a message saying how many values it sent and how many the endpoint takes."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._optional_ids: set[int] = set()

    def optional(self, component: gr.components.Component) -> gr.components.Component:
        """Mark an input that clients may leave out when it comes last."""
        self._optional_ids.add(component._id)
        return component

    async def preprocess_data(self, block_fn, inputs, state, explicit_call=False):
        missing = block_fn.inputs[len(inputs):]
        if missing and all(block._id in self._optional_ids for block in missing):
            inputs = [*inputs, *(None for _ in missing)]
        elif missing:  # Gradio's own refusal would reach the client as an error with no message (show_error=False)
            raise gr.Error(f"The request sent {len(inputs)} of the {len(block_fn.inputs)} values this endpoint takes "
                           "(the app's \"Use via API\" page lists them in order).", print_exception=False)
        return await super().preprocess_data(block_fn, inputs, state, explicit_call)


    async def postprocess_data(self, block_fn, predictions, state):
        """Gradio's, with two shortcuts that send the same answer:
        - an output left as it is (a bare gr.skip(), or not named in a dict of components) is answered at once as
          Gradio answers it (_skipped) (a gr.State's is Gradio's to answer): Gradio would
          first build a new component of the same arguments into the session's state (and its config entry), a
          copy of what the session already has, which changes nothing the page or a later event sees;
        - a value for a component whose postprocess only passes it on (INLINE: gr.HTML, gr.Textbox, ...) is
          postprocessed here, on the event loop: Gradio sends each output's postprocess to a worker thread, a hop
          that costs more than the call; and one that holds no file is sent as it is (Gradio walks every element of
          it for files to move into its cache, and copies it; the answer is copied once, by add_root_url).
        tests/server/test_answers.py compares the answers and the session's state with Gradio's own."""
        if block_fn.batch or block_fn.is_validator_function:
            return await super().postprocess_data(block_fn, predictions, state)
        if isinstance(predictions, dict) and predictions == gr.skip() and len(block_fn.outputs) > 1:
            predictions = [gr.skip()] * len(block_fn.outputs)
        if isinstance(predictions, dict) and predictions and all(isinstance(k, gr.blocks.Block) for k in predictions):
            predictions = _in_order(block_fn.outputs, predictions)
        elif len(block_fn.outputs) == 1:
            predictions = [predictions]
        if not isinstance(predictions, (list, tuple)) or len(predictions) != len(block_fn.outputs):
            return await super().postprocess_data(block_fn, predictions, state)
        given, state = state, state or SessionState(self)
        output: list[Any] = [None] * len(predictions)
        gradios, inline = [], []  # indices: Gradio's own way; postprocessed here
        for i, (block, value) in enumerate(zip(block_fn.outputs, predictions)):
            if block.stateful:
                gradios.append(i)
            elif utils.is_prop_update(value) and not _left_as_is(value):
                output[i] = _updated(block, value, given or state, block_fn.postprocess)
                if not no_file(output[i]):  # Gradio's walk moves the file into its cache
                    output[i] = await processing_utils.async_move_files_to_cache(output[i], block, postprocess=True)
            elif not block_fn.postprocess:
                gradios.append(i)
            elif _left_as_is(value):
                output[i] = _skipped(block)
            elif (type(block).postprocess in INLINE and not utils.is_prop_update(value)
                  and not isinstance(value, (gr.blocks.Block, SimpleNamespace))):
                inline.append(i)
            else:
                gradios.append(i)
        for indices, postprocess in ((gradios, True), (inline, False)):
            if not indices:
                continue
            some = copy.copy(block_fn)
            some.outputs = [block_fn.outputs[i] for i in indices]
            some.postprocess = block_fn.postprocess and postprocess
            values = [predictions[i] for i in indices]
            if not postprocess:  # what Gradio's postprocess branch does before it sends the value on
                values = [_postprocessed(state[block._id] if block._id in state else block, value)
                          for block, value in zip(some.outputs, values)]
                plain = [no_file(value) for value in values]
                for i, block, value, sent in zip(indices, some.outputs, values, plain):
                    if sent:  # what Gradio does with it, but for the walk that finds no file
                        if block._id not in (given or state):
                            (given or state)[block._id] = block
                        (given or state)._update_value_in_config(block._id, value)
                        output[i] = value
                indices = [i for i, sent in zip(indices, plain) if not sent]
                if not indices:
                    continue
                some.outputs = [block_fn.outputs[i] for i in indices]
                values = [value for value, sent in zip(values, plain) if not sent]
            done = await super().postprocess_data(some, values if len(indices) > 1 else values[0], given or state)
            for i, value in zip(indices, done):
                output[i] = value
        return output


def _updated(block: Any, update: dict, state: SessionState, postprocess: bool) -> dict:
    """Gradio's answer to a gr.update of `block` (Blocks.postprocess_data's branch for one), the component it puts in
    the session built once for every session that gets the same update (sessions.updated)."""
    update = utils.delete_none(update, skip_value=True)
    state[block._id] = sessions.updated(block, state.get(block._id, block), update)
    state._update_config(block._id)
    answer = gr.blocks.postprocess_update_dict(block=state[block._id], update_dict=update, postprocess=postprocess)
    if "value" in answer:
        state._update_value_in_config(block._id, answer.get("value"))
    return answer


def _postprocessed(block: Any, value: Any) -> Any:
    value = block.postprocess(value)
    return value.model_dump() if isinstance(value, (GradioModel, GradioRootModel)) else value


_SKIPPED: dict[type, dict] = {}


def _skipped(block: Any) -> dict:
    """What Gradio answers for a block's output left as it is (blocks.postprocess_update_dict of the update, which
    depends on the block's class only: {"__type__": "update"}, and a gr.HTML's with "props" too); a fresh copy."""
    kind = type(block)
    if kind not in _SKIPPED:
        _SKIPPED[kind] = gr.blocks.postprocess_update_dict(block=block, update_dict=dict(gr.skip()), postprocess=True)
    return json.loads(json.dumps(_SKIPPED[kind]))


def _left_as_is(value: Any) -> bool:
    """gr.skip(): an update with nothing in it."""
    return type(value) is dict and len(value) == 1 and value.get("__type__") == "update"


def _in_order(outputs: list, answer: dict) -> list | dict:
    """A dict of {component: value} as the list of every output's value, gr.skip() for those it does not name (what
    Gradio's convert_component_dict_to_list does for the app's own components); the dict itself where it names a
    component that is not an output (Gradio then says so)."""
    at = {block._id: i for i, block in enumerate(outputs)}
    values = [gr.skip() for _ in outputs]
    for component, value in answer.items():
        if component._id not in at:
            return answer
        values[at[component._id]] = value
    return values


_CONTAINERS = (dict, list, tuple)


_SCALARS = frozenset((str, int, float, bool, type(None)))  # JSON's: none is a container, or a subclass of one


def _containers_in(values: Any) -> bool:
    """Whether any of `values` is a dict, list or tuple (or of a subclass of one): each type among them looked at once,
    not each value (a lab answer's lists hold ~2,000 floats)."""
    kinds = set(map(type, values))
    return not kinds <= _SCALARS and any(issubclass(kind, _CONTAINERS) for kind in kinds)


def _is_file(value: dict) -> bool:
    """gradio_client's is_file_obj_with_meta, of a dict: "path" and a "meta" of _type gradio.FileData."""
    meta = value.get("meta")
    return "path" in value and isinstance(meta, dict) and meta.get("_type") == "gradio.FileData"


def no_file(value: Any) -> bool:
    """Whether `value` holds no file dict (_is_file), at any depth: what Gradio's walks of an answer would change."""
    if type(value) is dict:
        return not _is_file(value) and all(no_file(v) for v in value.values() if isinstance(v, _CONTAINERS))
    if isinstance(value, (list, tuple)):
        return not _containers_in(value) or all(no_file(v) for v in value if isinstance(v, _CONTAINERS))
    return not isinstance(value, dict)  # a dict's subclass: Gradio's walk asks it too


class HasFile(Exception):
    """A file dict (or a dict's subclass, which Gradio's walk asks too) met in an answer being copied."""


def copied(value: Any) -> Any:
    """What client_utils.traverse returns for a value that holds no file dict (_is_file), at any depth: every dict
    and list rebuilt (a tuple as a list), everything else as it is; HasFile at the first file dict, where Gradio's
    walk would change the answer. One pass: no_file's looking and the copying together."""
    if type(value) is dict:
        if _is_file(value):
            raise HasFile
        return {key: copied(v) if isinstance(v, _CONTAINERS) else v for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        if _containers_in(value):
            return [copied(v) if isinstance(v, _CONTAINERS) else v for v in value]
        return list(value)
    if isinstance(value, dict):  # a dict's subclass: Gradio's walk asks it too
        raise HasFile
    return value


def _add_root_url(data: Any, root_url: str, previous_root_url: str | None) -> Any:
    """processing_utils.add_root_url: an event's answer (the list of its outputs' values) that holds no file copied
    as Gradio's walk copies it, in one quick pass; anything else (the page's config, which holds files), Gradio's."""
    if type(data) is list:
        try:
            return copied(data)
        except HasFile:
            pass
    return GRADIOS_ADD_ROOT_URL(data, root_url, previous_root_url)


_add_root_url.__wrapped__ = GRADIOS_ADD_ROOT_URL  # what gradio_internals' check reads (inspect.unwrap)


@functools.lru_cache(maxsize=ROOT_URLS_KEPT)
def _root_url_of(url: str, headers: tuple[tuple[str, str], ...], route_path: str, root_path: str | None) -> str:
    """Gradio's get_root_url of a request with this url and these of its ORIGIN_HEADERS (all it reads of one)."""
    return GRADIOS_GET_ROOT_URL(SimpleNamespace(url=url, headers=dict(headers)), route_path, root_path)


def _get_root_url(request: Any, route_path: str, root_path: str | None) -> str:
    """route_utils.get_root_url, kept per request origin (its answer depends on nothing else)."""
    headers = request.headers
    found = tuple((name, headers[name]) for name in ORIGIN_HEADERS if name in headers)
    return _root_url_of(str(request.url), found, route_path, root_path)


_get_root_url.__wrapped__ = GRADIOS_GET_ROOT_URL  # what gradio_internals' check reads (inspect.unwrap)


def quick_root_urls() -> None:
    """Gradio's walk of every answer for its files' URLs (processing_utils.add_root_url, called by Blocks.process_api
    with the list of the outputs' values) copies an answer with no file in one pass of ours: the lab's ~2,000 numbers
    took ~0.7 ms. The page's config (a dict, with files) still goes Gradio's way. The root URL they start with
    (route_utils.get_root_url, asked by the queue for every event: ~0.3 ms) is worked out once per request origin."""
    processing_utils.add_root_url = _add_root_url
    route_utils.get_root_url = _get_root_url
