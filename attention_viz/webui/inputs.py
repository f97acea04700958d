"""The Transformer tab's inputs by name: each endpoint's inputs as a tuple of names in the API's order, one value
(`Inputs`) that the handlers read them from (`inputs.scale_mode`, never `values[3]`), and `takes`, which makes an
endpoint's signature (the names the API and gradio_client show) from its tuple. transformer_tab builds its events'
lists of components from the same tuples, so a page, an API client and a handler agree by name.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect

# the ten settings of one run (requests.parse_settings' names), in the order every endpoint takes them
SETTINGS = ("text", "model", "d_k", "scale_mode", "custom_factor", "causal_mask", "padding_mask", "pad_tokens",
            "d_model", "n_heads")
HEAD = ("kind", "layer", "head")  # the head chosen in the explorer
EXTRA = ("compatibility", "heads_off", "ablation", "position_bias")  # optional in the API: an older client leaves
                                                                      # them out
SIDE_B = ("other_text", "other_model")  # Compare's second text or model, optional too
OPTIONAL = frozenset((*EXTRA, *SIDE_B))

# each endpoint's inputs, in its order
VISUALIZE = (*SETTINGS, *EXTRA)  # /visualize, /importance, /induction, the scores' CSV
STEPS = (*SETTINGS, *HEAD, *EXTRA)
COMPARE = (*SETTINGS, *HEAD, "comparison", *EXTRA, *SIDE_B)
EXPORT = (*SETTINGS, *HEAD, "colour_scale", *EXTRA)
# the values of the run on screen, in handling.run_key's order: page.js's route of a control reads its own by index
ROUTED = (*SETTINGS, *EXTRA[1:])


@dataclasses.dataclass(frozen=True)
class Inputs:
    """The tab's inputs as one endpoint received them, raw (the service checks each); None: not among its inputs."""

    text: object = None
    model: object = None
    d_k: object = None
    scale_mode: object = None
    custom_factor: object = None
    causal_mask: object = None
    padding_mask: object = None
    pad_tokens: object = None
    d_model: object = None
    n_heads: object = None
    kind: object = None
    layer: object = None
    head: object = None
    comparison: object = None
    colour_scale: object = None
    compatibility: object = None
    heads_off: object = None
    ablation: object = None
    position_bias: object = None
    other_text: object = None
    other_model: object = None

    def pick(self, names: tuple[str, ...]) -> dict[str, object]:
        """These inputs by name, for an endpoint taking `names` (called by keyword)."""
        return {name: getattr(self, name) for name in names}

    def settings(self, heads: bool = True) -> dict[str, object]:
        """requests.parse_settings' keyword arguments: the ten settings, the compatibility and the position bias, and
        (heads) the heads switched off and the ablation."""
        return self.pick((*SETTINGS, *(EXTRA if heads else (n for n in EXTRA if n not in ("heads_off", "ablation")))))


def takes(names: tuple[str, ...]):
    """fn(self, ..., inputs, ...) as an endpoint of the values `names`, in that order, in the place of its `inputs`
    parameter: its signature names each one (required, but OPTIONAL's: None), so the API, gradio_client and Gradio's
    own reading of it (a gr.Request after them) see them by name; called with them, positionally or by name, fn gets
    them as one Inputs. A generator stays one (Gradio streams what it yields)."""
    def wrap(fn):
        own = list(inspect.signature(fn).parameters.values())
        at = [p.name for p in own].index("inputs")
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        signature = inspect.Signature([
            *own[:at],
            *(inspect.Parameter(name, kind, default=None if name in OPTIONAL else inspect.Parameter.empty)
              for name in names),
            *own[at + 1:]])

        def call(args, kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            given = bound.arguments
            inputs = Inputs(**{name: given[name] for name in names})
            return fn(*(given[p.name] for p in own[:at]), inputs, *(given[p.name] for p in own[at + 1:]))

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return (yield from call(args, kwargs))
        else:
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return call(args, kwargs)
        wrapper.__signature__ = signature
        wrapper.__annotations__ = {name: hint for name, hint in fn.__annotations__.items() if name != "inputs"}
        return wrapper

    return wrap
