"""The app's model side, no Gradio: validated requests, cached runs, the views' data, exports.

Its face, everything the page (webui) asks of it, is imported from here (`from attention_viz.service import Views,
EXAMPLES`): Views answers every view (a run, its head's steps, comparisons, exports, the lab, training); Runs keeps
the runs; the lesson, the live trainer, the own q·k view; the settings as checked; the pairs Compare offers; and
every constant of limits.py (each range, default and label a page shows) by its name. Each name is imported from its
module when first asked, so importing one module of the service (as the server does) loads no other.
"""

from __future__ import annotations

import importlib

FACE = {
    "Views": "views", "text_label": "views", "Runs": "runs", "warms_real_steps": "real_models",
    "Settings": "requests", "heads_off_text": "requests", "check_int": "checks", "ModelControls": "models",
    "Lesson": "lesson", "LiveTrainer": "live", "KIND_LABELS": "qk_view", "OwnQK": "qk_view", "PAIRS": "pairs",
    "PAIR_TEXTS": "pairs", "MediaViews": "media_view",
}


def __getattr__(name: str):
    """A name of the face (FACE's, or a constant: limits.py's), imported from its module once."""
    module = FACE.get(name) or ("limits" if name.isupper() else None)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
