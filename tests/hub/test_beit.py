"""BEiT and Data2VecVision (BEiT's code from before the attention interface) with its relative position bias (each layer's own table, one shared by the encoder, or both) through our
Eq. 1: proven on load with the bias honoured; every map and the output equal transformers' eager BEiT; B kept per
map key as the model computes it; position_bias=False equals eager with the bias tables zeroed; the scale switch and
heads off act as on text; the long pass, which does not cover a position bias, refuses it with a sentence."""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from attention_viz.core.variation import Variation  # noqa: E402
from attention_viz.hub import load_pretrained  # noqa: E402
from attention_viz.hub.long_kept import LongRunError  # noqa: E402
from devtools.hub_models import save_tiny_image  # noqa: E402

BIASES = {"own": {"use_relative_position_bias": True}, "shared": {"use_shared_relative_position_bias": True},
          "both": {"use_relative_position_bias": True, "use_shared_relative_position_bias": True}}


def picture() -> np.ndarray:
    y, x = np.mgrid[:40, :52]
    return np.stack([x * 5 % 256, y * 6 % 256, (x + y) * 3 % 256], -1).astype(np.uint8)


class Beit:
    """Where transformers keeps what the test reaches, per family: BEiT's (in the attention interface) and
    Data2VecVision's (BEiT's code from before it)."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.cls = transformers.BeitModel if family == "beit" else transformers.Data2VecVisionModel

    def layers(self, model):
        return model.layers if self.family == "beit" else model.encoder.layer

    def tables(self, model, i: int):
        """Layer i's relative position bias modules: its own, the shared one (None where it has none)."""
        if self.family == "beit":
            return model.layers[i].relative_position_bias, model.shared_position_bias
        own = model.encoder.layer[i].attention.attention
        return (own.relative_position_bias if own.has_relative_position_bias else None,
                model.encoder.relative_position_bias if model.encoder.has_relative_position_bias else None)

    def w_o(self, model, i: int):
        layer = self.layers(model)[i]
        return layer.attention.o_proj if self.family == "beit" else layer.attention.output.dense

    def eager(self, folder, zeroed: bool = False, scaling: float | None = None):
        """transformers' model from the folder, eager attention, float64; its bias tables zeroed, or (BEiT) its
        factor on QKᵀ replaced, on request."""
        model = self.cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float64).eval()
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if zeroed and name.endswith("relative_position_bias_table"):
                    parameter.zero_()
        for layer in self.layers(model):
            if scaling is not None:
                layer.attention.scaling = scaling
        return model


def run_eager(model, pixels) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    with torch.no_grad():
        out = model(pixel_values=pixels, output_attentions=True)
    return out.last_hidden_state, {f"encoder.{i}.self_attn": a for i, a in enumerate(out.attentions)}


def assert_same(ours: tuple, theirs: tuple) -> None:
    (output, maps), (reference, eager_maps) = ours, theirs
    assert list(maps) == list(eager_maps)
    for key in maps:
        torch.testing.assert_close(maps[key], eager_maps[key], rtol=0, atol=1e-6, msg=key)  # eager: float32 softmax
    torch.testing.assert_close(output, reference, rtol=0, atol=1e-6)


@pytest.mark.parametrize("family", ["beit", "data2vec-vision"])
@pytest.mark.parametrize("bias", list(BIASES))
def test_beit_runs_with_its_relative_position_bias_as_eager_and_the_switch_takes_it_out(family, bias, tmp_path):
    folder = save_tiny_image(family, tmp_path / family, **BIASES[bias])
    kin = Beit(family)
    ours = load_pretrained(folder, dtype=torch.float64)
    assert ours.fidelity.proven and "position_bias" in ours.fidelity.honoured, ours.fidelity
    assert "with its position bias" in str(ours.fidelity) and ours.abilities.position_bias
    pixels = ours.encode(picture()).ids[None].double()  # (1, 3, 32, 32): 16 patches and [CLS]
    theirs = kin.eager(folder)
    recorded = ours.traced(pixels)
    assert_same((recorded.logits, recorded.maps), run_eager(theirs, pixels))

    # B, per map key: the layer's own table's and the shared one's, as transformers computes them
    T, window = ours.modality.length, ours.modality.grid
    assert sorted(recorded.biases) == ours.map_keys
    for i in range(2):
        with torch.no_grad():
            parts = [table(window, False, dim_size=T) for table in kin.tables(theirs, i) if table is not None]
        torch.testing.assert_close(recorded.biases[f"encoder.{i}.self_attn"], sum(parts), rtol=0, atol=0)
        assert recorded.biases[f"encoder.{i}.self_attn"].shape == (1, 4, T, T)

    # the switch: B taken out, as transformers computes the model with its bias tables zeroed
    off = ours.traced(pixels, variation=Variation(position_bias=False))
    assert off.biases == {}
    assert_same((off.logits, off.maps), run_eager(kin.eager(folder, zeroed=True), pixels))
    assert float((off.maps["encoder.0.self_attn"] - recorded.maps["encoder.0.self_attn"]).abs().max().detach()) > 1e-3
    output, _ = ours.forward(pixels, position_bias=False)  # the keyword front
    torch.testing.assert_close(output, off.logits, rtol=0, atol=0)

    # the scale switch: eager with its factor on QKᵀ replaced, B added after it (BEiT's factor is an attribute)
    factor = 0.9
    if family == "beit":
        assert_same(ours.forward(pixels, scale=factor), run_eager(kin.eager(folder, scaling=factor), pixels))
    assert float((ours.forward(pixels, scale=factor)[0] - recorded.logits).abs().max().detach()) > 1e-3

    # heads off: eager with that head's columns of W_O zeroed
    d = ours.d_k
    cut = kin.eager(folder)
    with torch.no_grad():
        for i in range(2):
            kin.w_o(cut, i).weight[:, d:2 * d] = 0  # head 1
    output, _ = ours.forward(pixels, heads_off={key: [1] for key in ours.map_keys})
    torch.testing.assert_close(output, run_eager(cut, pixels)[0], rtol=0, atol=1e-6)

    with pytest.raises(LongRunError, match=r"does not cover attention with a position bias \(T5.s or BEiT.s"):
        ours.long_run(pixels)
