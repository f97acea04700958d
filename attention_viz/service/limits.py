"""Every user-facing range, default and label of the app, in one place (the UI and the checks both read them)."""

from __future__ import annotations

from attention_viz.core.attention import SCALE_MODES

# ----------------------------------------------------------------------------- the Transformer view

UNTRAINED = "untrained"        # the model picker's value for a randomly initialised model
# Examples belong to a model: the picker offers each model's own (ModelControls.examples).
EXAMPLES = ["attention", "transformer", "hello", "softmax", "abcdefghij", "queries"]  # a-z: copy, reverse, sort
DATE_EXAMPLES = ["twenty second of november 2026", "first of may 1999", "third of july 2001"]  # the dates model
REAL_EXAMPLES = ("Attention is all you need.", "The cat sat on the mat.",
                 "She wrote a letter to her friend in Berlin.")  # a real model reads any text
# The √d_k compatibility study (docs/study.md): its members are families of their own, keyed STUDY_PREFIX + arm.
STUDY_PREFIX = "study/"
STUDY_ARMS = {"scaled_dot": "scaled dot product", "dot": "plain dot product", "additive": "additive attention"}
STUDY_LABELS = {           # the model picker's labels of the study's families
    "scaled_dot": "reverse, 1 head (study): scaled dot product",
    "dot": "reverse, 1 head (study): plain dot product (trained without 1/√d_k)",
    "additive": "reverse, 1 head (study): additive attention",
}
COMPATIBILITY_LABEL = "compatibility function"  # the picker's label, and the input's name in messages
SCALE_LABELS = {"sqrt_dk": "1/√d_k (paper)", "none": "off (plain q·k)"}  # core.attention.SCALE_MODES, for people
SCALE_CHOICES = {**{mode: SCALE_LABELS[mode] for mode in SCALE_MODES}, "custom": "custom factor"}  # the scaling input
COLOUR_SCALES = {"absolute": "0 → 1 for every head", "per_head": "0 → each head's maximum"}
COMPARISONS = {
    "scaling": ("scaled by 1/√d_k", "unscaled"),
    "causal_mask": ("causal mask on", "causal mask off"),
    "padding_mask": ("padding mask on", "padding mask off"),
    "position_bias": ("position bias on", "position bias off"),  # a model that adds one to QKᵀ (T5, ALiBi)
}
POSITION_BIAS_LABEL = "position bias B added to QKᵀ (the model's own sense of word order)"
ABLATIONS = {"zero": "zero (Michel's gate ξ_h = 0)", "mean": "its mean output (over reference texts)"}
HEADS_OFF_CHARS = 4000         # the heads-off text ("decoder.1.cross_attn: 0 2; encoder.0.self_attn: all") at most
MEAN_REFERENCE_STRINGS = 50    # mean ablation's reference batch: a task's first held-out strings (copy's, untrained)
REAL_REFERENCE_TEXTS = (       # ... and a real model's: these texts and what it writes for them
    "The cat sat on the mat.", "Attention is all you need.", "Every student reads the paper before the lecture.",
    "The weather is nice today, so we walk to the city.", "How many heads does this model need?",
    "She wrote a letter to her friend in Berlin.", "Numbers like 2026 and 512 appear in text too.",
    "A good teacher explains one idea at a time.",
)
STAT_HEADERS = ["layer", "head", "entropy (nats)", "max weight", "mean distance", "on diagonal"]

# Ranges of the numeric inputs (inclusive).
D_K_RANGE = (1, 1024)
D_MODEL_RANGE = (8, 512)
HEADS_RANGE = (1, 16)
MAX_HEAD_WIDTH = 4096          # untrained model: h·d_k at most this, so W_Q and W_K stay small (<= 8 MiB each)
PAD_TOKENS_RANGE = (0, 16)
FACTOR_RANGE = (1e-3, 100.0)   # custom scale factor
LAYER_HEAD_LIMIT = 64          # layer and head indices are checked against the model; this bounds them first

# The untrained model.
UNTRAINED_LAYERS = 2           # N, encoder and decoder
UNTRAINED_SEED = 0
DEFAULT_UNTRAINED = {"d_model": 64, "n_heads": 4, "d_k": 16}
EXTRA_DECODE_STEPS = 4         # a trained model may run past the source length by this many tokens before it is stopped

# ----------------------------------------------------------------------------- the √d_k lab

LAB_D_K_RANGE = (1, 4096)
LAB_KEYS_RANGE = (2, 1024)
LAB_D_K = 16                   # the lab opens at this d_k ...
LAB_KEYS = 32                  # ... with this many keys
LAB_SAMPLES = 20_000           # q·k samples in the histogram
LAB_SEED = 0
LAB_HEADERS = ["quantity", "unscaled q·k", "scaled q·k / √d_k", "theory"]
LAB_TABLE = "At this d_k, both modes"  # the caption of the lab's table of medians (its headers above)

# ----------------------------------------------------------------------------- training live (service/live.py)

LIVE_TASKS = ("reverse", "copy", "sort")
LIVE_D_KS = (8, 32, 128, 512, 1024)  # the study's sizes
LIVE_ARMS = {"scaled_dot": "scaled dot product (1/√d_k)", "dot": "plain dot product (no 1/√d_k)",
             "additive": "additive attention"}
LIVE_STEPS = 600               # a run's step budget ...
LIVE_SECONDS = 55.0            # ... or this many seconds of training, whichever comes first
LIVE_LINE = 8                  # users who may wait for their turn; one more is refused

# ----------------------------------------------------------------------------- server resources

UNTRAINED_CACHE_BYTES = 32 * 2**20  # untrained models kept, by parameter bytes (the widest, ~110 MB, is rebuilt)
RUN_CACHE_BYTES = 64 * 2**20   # runs kept, by their maps' bytes: ~20 kB for a trained model's short text, ~0.5 MB
                               # for the widest untrained one, more for a real model; a class's runs, each its own
PACKED_CACHE_BYTES = 1 * 2**20  # packed runs kept, by their base64: for quick repeats only (repacking a cached run
                                # takes ~5 ms; a run with per-step maps, up to ~1.5 MB, is not kept; docs/benchmarks.md)
IMAGE_CACHE_SIZE = 8           # rendered images kept per kind of figure (as PNG file names)
STEPS_KEPT = 64                # the steps views of one head kept (a trained model's: ~10 kB; a real model's long
#                                text: up to ~1 MB)
GRID_WIDTH = 900               # pixels the grid of every head is scaled to, about
KEPT_EXPORTS = 512             # export folders kept on disk, all clients together; the oldest are deleted ...
EXPORT_BYTES = 256 * 2**20     # ... past this many bytes of them (the pod's /tmp holds 1 GiB: deploy/kubernetes/)
EXPORTS_PER_CLIENT = 4         # export folders kept per client (a page's session): its last few exports
FLOW_WORK = 10_000             # the explorer's attention flow: layers x tokens^4 at most (2 x 8, 6 x 6: <= ~10 ms a stack)
EXPORT_PAGE_BYTES = 16 * 2**20  # the export's one-file explorer page at most (the widest run the app takes: ~0.6 MB)
KEPT_PNGS = 2048               # image files kept for the app to serve (content-named; tens of MB on disk)

# ----------------------------------------------------------------------------- real models (attention_viz.hub)

HUB_MODELS_ENV = "ATTENTION_VIZ_HUB_MODELS"  # comma-separated Hub ids or local folders the server is set up with
WARM_REAL_ENV = "ATTENTION_VIZ_WARM_REAL"  # "1": the lesson's real steps computed at start, in the background
#                                            (loading their models); "0": at their first use; unset: on a Space only
REAL_DEVICE_ENV = "ATTENTION_VIZ_DEVICE"  # where real models run: "auto" (unset: a GPU where the server has one, else
#                                         the CPU), "cpu", "cuda", "cuda:1"; our own models run on the CPU
HUB_PREFIX = "hub:"            # the model picker's value of a real model: "hub:" + the id or folder as set up
REAL_TEXT_CHARS = 500          # a real model's text: at most this many characters ...
REAL_SOURCE_TOKENS = 64        # ... and this many tokens as its tokenizer cuts it (special tokens included)
REAL_NEW_TOKENS = 40           # tokens a real model may write at most: a translation 1.5 x its source + 10 (as
                               # fairseq bounds a beam), a decoder-only model's continuation REAL_CONTINUATION
REAL_CONTINUATION = 20


def real_new_tokens(source_tokens: int, has_source: bool) -> int:
    """How many tokens a real model may write for a source of this many tokens (its continuation, for a decoder)."""
    if not has_source:
        return REAL_CONTINUATION
    return min(REAL_NEW_TOKENS, source_tokens + source_tokens // 2 + 10)

# ----------------------------------------------------------------------------- a real model at length (service/long_runs.py)

LONG_TOKENS = 4096             # a page read at once on the CPU: at most this many tokens (fewer where the model's
                               # positions end) ...
LONG_TOKENS_GPU = 32_768       # ... on a GPU: this many, fewer where the device's free memory holds fewer
LONG_DEVICE_SHARE = 0.5        # the share of a GPU's free memory (after the weights) one long pass may take
LONG_TEXT_CHARS = 40_000       # a page of at most this many characters for LONG_TOKENS (~10 characters a token at
                               # most), as many more for more tokens
LONG_KEPT_BYTES = 1536 * 2**20  # kept long runs (q, k, lse on the temporary disk), all visitors together; the least
                               # recently used is dropped first (SmolLM2-135M at 4,096 tokens keeps 364 MiB)
LONG_KEPT_ENV = "ATTENTION_VIZ_LONG_KEPT_MB"  # the operator's budget for them instead, in MiB
LONG_OVERVIEW = 512            # an overview's side in cells, at most
LONG_VIEWS_AT_ONCE = 2         # overviews and regions computed at once, the whole server (an overview at 4,096
                               # tokens: ~0.3 s of a core; a region: a few ms)
LONG_WAIT_S = 600.0            # a long pass waits this long for the one before it, then is told to try again

# ----------------------------------------------------------------------------- pictures and recordings (service/media_view.py)

MEDIA_UPLOAD_BYTES = 16 * 2**20  # an uploaded file at most (a phone's photo, 30 s of CD-quality WAV; uploads wait on
                                 # the temporary disk for an hour, which a pod has 1 GiB of); a recording is read by
                                 # its first 30 s, so a longer one is cut, and one past this is refused at upload
MEDIA_RUNS_KEPT = 8            # picture and recording runs kept, all visitors together (a ViT-base run's maps: 22 MB;
                               # a recording's decoder and cross maps, its encoder's q, k and lse with the long runs)
MEDIA_NEW_TOKENS = 40          # tokens a speech model writes at most (its transcript of 30 s, greedily)
MEDIA_OVERLAY_SIDE = 448       # pixels the clickable overlay's picture is zoomed to, about (a whole zoom factor)
