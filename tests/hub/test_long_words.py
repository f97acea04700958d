"""A long run's views read by people: the sink left out of each row (exact, against transformers' eager maps in
float64, column 0 dropped and rows renormalised), and pieces merged into words on GPT-2, BERT and SentencePiece."""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from attention_viz.hub import load_pretrained  # noqa: E402
from attention_viz.hub.loading import model_class  # noqa: E402
from attention_viz.hub.words import words_of  # noqa: E402

F32 = dict(rtol=2e-6, atol=2e-7)  # float32 rounding of weights <= 1, renormalised by a sum < 1


def sinkless(full: torch.Tensor) -> torch.Tensor:
    """A map [T, T] with column 0 dropped (set to 0) and each row renormalised over the rest; a row with nothing
    left stays 0."""
    rest = full[:, 1:].sum(-1, keepdim=True)
    out = torch.where(rest > 0, full / torch.where(rest > 0, rest, 1.0), 0.0)
    out[:, 0] = 0.0
    return out


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_views_without_the_sink_equal_eager_maps_renormalised(tiny_folder, family):
    """region and overview(without_sink=True) against eager's map with column 0 dropped and rows renormalised; every
    row of a region sums to 1 (0 for row 0 under the causal mask: it sees only the sink)."""
    folder = tiny_folder(family)
    ours = load_pretrained(folder, dtype=torch.float64, device="cpu")
    config = transformers.AutoConfig.from_pretrained(folder)
    reference = model_class(config).from_pretrained(folder, attn_implementation="eager", dtype=torch.float64).eval()
    ids = torch.randint(5, len(ours.tokenizer), (1, 90), generator=torch.Generator().manual_seed(3))
    run = ours.long_run(ids, rows=32)
    with torch.no_grad():
        maps = reference(input_ids=ids, output_attentions=True).attentions
    last = ours.long_run(ids, rows=32, last_logits=True)  # a decoder's head on the last position only (not T x V)
    assert last.length == 90 and last.logits.size(1) == (1 if family == "gpt2" else 90)
    torch.testing.assert_close(last.logits[:, -1], run.logits[:, -1], rtol=1e-12, atol=1e-12)
    last.close()
    key = run.keys[-1]
    for head in (0, 3):
        full = sinkless(maps[-1][0, head])  # (T, T)
        region = run.region(key, head, slice(0, 90), slice(0, 90), without_sink=True)
        np.testing.assert_allclose(region, full.numpy(), **F32)
        inner = run.region(key, head, slice(40, 70), slice(20, 50), without_sink=True)  # a block off column 0
        np.testing.assert_allclose(inner, full[40:70, 20:50].numpy(), **F32)
        sums = region.sum(-1, dtype=np.float64)
        np.testing.assert_allclose(sums[1:], 1.0, atol=1e-5)
        assert sums[0] == (0.0 if family == "gpt2" else pytest.approx(1.0, abs=1e-5))
        b = 4  # overview blocks of 4 (90 = 22 blocks + a partial one of 2)
        padded = torch.zeros(92, 92, dtype=torch.float64)
        padded[:90, :90] = full
        grid = padded.view(23, b, 23, b)
        np.testing.assert_allclose(run.overview(key, head, size=23, without_sink=True), grid.amax(dim=(1, 3)).numpy(),
                                   **F32)
        sides = torch.tensor([4.0] * 22 + [2.0], dtype=torch.float64)
        mean = grid.sum(dim=(1, 3)) / (sides[:, None] * sides[None])
        np.testing.assert_allclose(run.overview(key, head, size=23, reduce="mean", without_sink=True), mean.numpy(),
                                   **F32)
    run.close()


TEXT = "The reader's unbelievable café\nnext line, naïve ✓ ok"


@pytest.mark.parametrize("family, words", [
    ("gpt2", ["The", "reader's", "unbelievable", "café", "next", "line,", "naïve", "✓", "ok"]),   # byte-level BPE
    ("bert", ["[CLS]", "the", "reader", "'", "s", "unbelievable", "cafe", "next", "line", ",", "naive", "[UNK]", "ok",
              "[SEP]"]),                                                                         # WordPiece
    ("llama", ["<s>", "The", "reader's", "unbelievable", "café", "next", "line,", "naïve", "✓", "ok"]),  # SentencePiece
])
def test_pieces_merge_into_the_words_they_spell(tiny_folder, family, words):
    """Each family's pieces of one text merge into its words: "Ġ", "▁" and "##" read as spaces or continuations,
    a character split over byte pieces (é, ï, ✓) made whole, a newline or lone space beginning the next word."""
    tokenizer = load_pretrained(tiny_folder(family), device="cpu").tokenizer
    ids = tokenizer(TEXT)["input_ids"]
    found = words_of(tokenizer, ids)
    assert found.words == words
    assert len(found.pieces) == len(found.word_of) == len(ids)
    assert found.word_of == sorted(found.word_of) and found.starts[0] == 0
    assert [found.word_of[t] for t in found.starts] == list(range(len(words)))
    assert not any(marker in piece for piece in found.pieces for marker in ("Ġ", "▁", "##"))
    if family == "gpt2":
        assert found.pieces[2] == " rea" and found.pieces[22] == "\n"  # "Ġrea" and "Ċ" as characters


def test_show_a_long_text_embeds_every_heads_overview_within_its_budget(tiny_folder):
    """show(model, long_text) in a notebook: the long view, every head's overview (block max) embedded as the run's
    own overview at the side the budget allows; the page stays within the budget plus its scripts."""
    import base64
    import json

    from attention_viz.explorer.notebook import LONG_FROM, run_long, show

    model = load_pretrained(tiny_folder("gpt2"), device="cpu")
    text = "the cat sat on the mat and the model reads every word of the sentence. " * 12
    assert model.encode(text).ids.numel() > 256 == LONG_FROM  # the tiny GPT-2: a piece is a few characters
    view = show(model, text)
    payload = view.payload
    assert payload["kind"] == "long" and payload["read"] == 256 < payload["of"]
    assert "positions end at 256" in payload["note"]
    assert 'data-av-long="' in view.html and "AttentionLong.mountAll" in view.html
    small = run_long(model, text, budget=40_000)  # 2 maps x 4 heads in 40 kB: at most 44 a side: blocks of 6 tokens
    offline = small["offline"]
    assert offline["side"] == 43 and offline["block"] == 6
    assert len(json.dumps(offline)) <= 40_000 * 1.1
    run = model.long_run(model.encode(text).ids[:256])
    key = run.keys[1]
    packed = offline["maps"][key][2]
    cells = np.frombuffer(base64.b64decode(packed["data"]), "<u2").reshape(43, 43) / 65535 * packed["top"]
    np.testing.assert_allclose(cells, run.overview(key, 2, size=44), atol=packed["top"] / 65535)
    run.close()


def test_show_an_encoder_decoder_long_reads_the_page_with_its_encoder(tiny_folder):
    """show(translation_model, long_text, long=True): the encoder's maps, capped at its positions, and the page says
    both (the same sentences as the app's Long text tab)."""
    from attention_viz.explorer.notebook import show
    from attention_viz.hub.long import READS_WITH_ENCODER
    from attention_viz.hub import TextTooLongError

    model = load_pretrained(tiny_folder("marian"), device="cpu")
    text = "the cat sat on the mat and the model reads every word of the sentence. " * 12
    with pytest.raises(TextTooLongError, match="reads at most 256 positions at once"):  # unless asked: translated
        show(model, text)
    payload = show(model, text, long=True).payload
    assert payload["kind"] == "long" and payload["read"] == 256 < payload["of"]
    assert payload["keys"] and all(key.startswith("encoder.") for key in payload["keys"])
    assert payload["note"] == (f"Read the first 256 of the text's {payload['of']:,} tokens: {model.name}'s positions "
                               f"end at 256. {READS_WITH_ENCODER}.")


