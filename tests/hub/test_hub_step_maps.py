"""A real model's per-step decoder maps (PretrainedTransformer.step_maps, what the app and the notebook replay): step t
is the pass on the decoder's first t + 1 tokens; under the causal mask it is the last step's first t + 1 rows (a row
sees only earlier positions), without it earlier rows change as tokens arrive."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

import attention_viz as av  # noqa: E402
from attention_viz.core.variation import Variation  # noqa: E402


@pytest.mark.parametrize("family", ["marian", "gpt2"])
def test_each_step_is_the_pass_on_its_prefix(tiny_folders, family):
    model = av.load_pretrained(tiny_folders[family])
    src = torch.tensor([[5, 9, 12, 7, 3]]) if model.layout == "encoder-decoder" else None  # (1, S)
    tgt = torch.tensor([[1, 8, 4, 11, 6, 2]])  # (1, T)
    for variation in (Variation(), Variation("none", causal_mask=False)):
        with torch.inference_mode():
            steps = model.step_maps(src, tgt, variation=variation)
            assert len(steps) == tgt.size(1)
            for t, step in enumerate(steps):
                args = (src, tgt[:, : t + 1]) if src is not None else (tgt[:, : t + 1],)
                alone = model.traced(*args, variation=variation).maps.to_numpy()
                decoder = {key: value[0] for key, value in alone.items() if key.startswith("decoder.")}
                assert step.keys() == decoder.keys() and decoder
                for key, value in decoder.items():
                    assert step[key].shape[-2] == t + 1
                    np.testing.assert_array_equal(step[key], value)
        last = steps[-1]
        key = "decoder.0.self_attn"
        early = [np.abs(step[key] - last[key][:, : t + 1, : step[key].shape[-1]]).max() for t, step in enumerate(steps)]
        if variation.causal_mask:
            assert max(early) < 1e-6  # rows 0..t never change after step t
        else:
            assert max(early) > 1e-4  # without the mask, later tokens change earlier rows
