"""How the app serves a widget's function: refusals as gr.Error, faults logged and told without their trace, the
call watched (server.liveness) and memory given back after it; answers by component name; the controls' values as
the page's routes read them. Handlers (webui/handlers.py) are written in these terms.
"""

from __future__ import annotations

import functools
import json
import logging
import typing

import gradio as gr

from attention_viz.server.liveness import WATCH
from attention_viz.server.runtime import release_free_memory

logger = logging.getLogger(__name__)


def named(fn, components: dict):
    """fn's answer {name: value} as Gradio's {component: value} for the components named (the event's outputs:
    `list(components.values())`); a component it does not name keeps its value, and names not in `components` are
    dropped (a view this page does not have)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        answer = fn(*args, **kwargs)
        named_answer = {components[name]: value for name, value in answer.items() if name in components}
        # nothing to change: Gradio reads an empty dict as one output's value, so one output is skipped by name
        return named_answer or {next(iter(components.values())): gr.skip()}

    return resolved(wrapper)


def resolved(wrapper):
    """`wrapper` with its annotations evaluated once: Gradio reads a function's type hints on every call (looking
    for a gr.Request parameter), and this module's are strings (from __future__ import annotations), evaluated each
    time (~0.3 ms an event). Where one cannot be evaluated yet, the strings stay."""
    try:
        wrapper.__annotations__ = typing.get_type_hints(wrapper)
    except (NameError, TypeError):
        pass
    return wrapper


def run_key(*values) -> str:
    """The controls' values as the page's routes read them (widgets.route_one_js: JSON, whole numbers without a
    decimal point): while the controls hold these, their change events send nothing."""
    def js(value):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value
    return json.dumps([js(v) for v in values], ensure_ascii=False, separators=(",", ":"))


def shown_reason(error: Exception, limit: int = 160) -> str:
    """A refusal's message cut to `limit` characters, for a line under a control."""
    text = str(error)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def handler(fn):
    """A widget's function as the app serves it (the signature is kept for the API): counted as a call in flight
    (liveness.WATCH), ValueError -> gr.Error, any other exception logged with its trace for the operator and told to
    the visitor without it, and after each call the heap's free pages go back to the system
    (runtime.release_free_memory)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            with WATCH.call(fn.__name__):
                return fn(*args, **kwargs)
        except ValueError as error:
            raise gr.Error(str(error), print_exception=False) from None
        except (gr.Error, KeyboardInterrupt, GeneratorExit):
            raise
        except Exception as error:  # noqa: BLE001 - a fault of ours: the trace is for the log, never the page
            logger.exception("%s failed", fn.__name__)
            raise gr.Error(f"The server could not answer this ({type(error).__name__}); nothing else changed. "
                           "Try another input, or again.", print_exception=False) from None
        finally:
            release_free_memory()

    return resolved(wrapper)
