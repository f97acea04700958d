"""Train a small Transformer on a toy task: `python -m attention_viz.train --task reverse --d-k 16 --scale sqrt_dk`.

Each step draws a fresh seeded batch, so the loss and accuracy logged on it are measured on data the
model has not yet been trained on. At the end the model is decoded greedily on the held-out strings
and saved as NAME.safetensors + NAME.json (the card: config, task, scale, steps, wall time, held-out
exact match, and the curve).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from attention_viz.core.attention import SCALE_MODES
from attention_viz.data.checkpoints import count_parameters, save_checkpoint
from attention_viz.core.config import COMPATIBILITIES, INITS, TransformerConfig
from attention_viz.core.device import resolve_device
from attention_viz.core.model import Transformer
from attention_viz.data.tasks import (
    HELDOUT_SEED, HELDOUT_SIZE, TASKS, batches, heldout_strings, make_batch, target, task_alphabet, task_max_len,
)
from attention_viz.data.tokenizer import VOCAB_SIZE, CharTokenizer

SCALE_ALIASES = {"on": "sqrt_dk", "off": "none", "sqrt_dk": "sqrt_dk", "none": "none"}


@dataclass(frozen=True)
class TrainSettings:
    """Everything that decides a training run; two runs with equal settings give equal weights on one device."""

    task: str = "reverse"
    scale: str = "sqrt_dk"       # "sqrt_dk" (the paper) or "none" (plain dot products); the card keeps it
    d_k: int = 16                # query/key width per head
    d_v: int = 16                # value width per head
    d_model: int = 64
    n_heads: int = 4             # h
    n_layers: int = 2            # N, for the encoder and for the decoder
    d_ff: int = 256
    dropout: float = 0.0         # fresh data every step: nothing to regularise
    max_len: int | None = None   # longest training text, in characters; None: the task's own (20; dates 32)
    steps: int = 2000
    batch_size: int = 64
    lr: float = 1e-3             # Adam's peak learning rate
    warmup: int = 100            # linear warm-up steps, then cosine decay to lr / 10
    clip_norm: float = 1.0       # gradient-norm clipping
    label_smoothing: float = 0.0
    seed: int = 0                # weights and the training stream
    log_every: int = 25          # steps per point of the curve
    heldout_size: int = HELDOUT_SIZE  # held-out strings decoded greedily at the end
    compatibility: str = "dot_product"  # "dot_product" (scaled or not by `scale`) or "additive" (§3.2.1)
    init: str = "xavier"         # "xavier" or "unit_qk" (q, k components of variance ≈ 1 at step 0, footnote 4)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; choose one of {', '.join(TASKS)}")
        if self.scale not in SCALE_MODES:
            raise ValueError(f"scale must be one of {SCALE_MODES}, got {self.scale!r}")
        if self.max_len is None:
            object.__setattr__(self, "max_len", task_max_len(self.task))
        if self.task == "dates" and self.max_len < task_max_len("dates"):
            raise ValueError(f"dates run to {task_max_len('dates')} characters; max_len {self.max_len} is too short")
        self.model_config()  # fail fast on an unknown compatibility or init

    def model_config(self) -> TransformerConfig:
        """The TransformerConfig these settings train."""
        return TransformerConfig(
            vocab_size=VOCAB_SIZE, n_encoder_layers=self.n_layers, n_decoder_layers=self.n_layers,
            d_model=self.d_model, n_heads=self.n_heads, d_k=self.d_k, d_v=self.d_v, d_ff=self.d_ff,
            dropout=self.dropout, compatibility=self.compatibility, init=self.init,
        )


def learning_rate(step: int, settings: TrainSettings) -> float:
    """Linear warm-up to `lr` over `warmup` steps, then cosine decay to lr / 10 at the last step."""
    if step < settings.warmup:
        return settings.lr * (step + 1) / settings.warmup
    progress = (step - settings.warmup) / max(1, settings.steps - settings.warmup)
    return settings.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress))))


def sequence_loss(
    logits: torch.Tensor, tgt_out: torch.Tensor, pad_id: int, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy over the non-pad target tokens; logits [B, T, V], tgt_out [B, T]."""
    return F.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=pad_id, label_smoothing=label_smoothing
    )  # (B·T, V) against (B·T,)


def accuracies(logits: torch.Tensor, tgt_out: torch.Tensor, pad_id: int) -> tuple[float, float]:
    """(token accuracy, sequence exact match) of teacher-forced argmax predictions, ignoring padding."""
    real = tgt_out != pad_id  # (B, T)
    right = (logits.argmax(-1) == tgt_out) & real  # (B, T)
    token_acc = right.sum().item() / real.sum().item()
    exact = (right | ~real).all(dim=1).float().mean().item()
    return token_acc, exact


@torch.no_grad()
def exact_match(
    model: Transformer, texts: list[str], task: str, tokenizer: CharTokenizer, scale: str, batch_size: int = 500
) -> float:
    """Fraction of `texts` whose greedy decoding equals the task's target exactly (leaves the model in eval mode)."""
    model.eval()
    device = next(model.parameters()).device
    hits = 0
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        src = make_batch(chunk, task, tokenizer).src.to(device)
        tokens, _ = model.greedy_decode(src, tokenizer.max_len + 1, scale=scale)
        hits += sum(tokenizer.decode(row) == target(task, text) for row, text in zip(tokens.tolist(), chunk))
    return hits / len(texts)


# Called as observe(step, model, batch) before the first update (step 0, batch None) and after every update
# (step = updates done; batch = {"loss", "token_acc", "exact_match"} of the batch that update trained on).
Observer = Callable[[int, Transformer, dict | None], None]


def train(
    settings: TrainSettings, device: str | torch.device = "auto", progress: bool = True,
    observe: Observer | None = None,
) -> tuple[Transformer, dict]:
    """Train one model; returns (model in eval mode, its card without name/config, which save_checkpoint adds)."""
    device = resolve_device(device)
    tokenizer = CharTokenizer(max_len=settings.max_len)
    torch.manual_seed(settings.seed)
    model = Transformer(settings.model_config()).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr, betas=(0.9, 0.98), eps=1e-9)  # §5.3
    stream = batches(settings.task, tokenizer, settings.batch_size, seed=settings.seed)
    curve: dict[str, list] = {"step": [], "loss": [], "token_acc": [], "exact_match": []}
    window = []  # (loss, token_acc, exact) since the last curve point
    start, cpu_start = time.perf_counter(), time.process_time()
    bar = tqdm(range(settings.steps), desc=f"{settings.task} d_k={settings.d_k} {settings.compatibility} {settings.scale}",
               file=sys.stderr, disable=not progress, dynamic_ncols=True)
    if observe is not None:
        observe(0, model, None)  # the observer must leave the model in training mode
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, settings)
        batch = next(stream).to(device)
        logits, _ = model(batch.src, batch.tgt_in, scale=settings.scale)
        loss = sequence_loss(logits, batch.tgt_out, tokenizer.pad_id, settings.label_smoothing)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss became {loss.item()} at step {step}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.clip_norm)
        optimizer.step()
        window.append((loss.item(), *accuracies(logits.detach(), batch.tgt_out, tokenizer.pad_id)))
        if observe is not None:
            observe(step + 1, model, dict(zip(("loss", "token_acc", "exact_match"), window[-1])))
        if (step + 1) % settings.log_every == 0 or step + 1 == settings.steps:
            means = [sum(column) / len(window) for column in zip(*window)]
            for key, value in zip(("loss", "token_acc", "exact_match"), means):
                curve[key].append(round(value, 5))
            curve["step"].append(step + 1)
            window = []
            bar.set_postfix(loss=f"{means[0]:.4f}", acc=f"{means[1]:.3f}", exact=f"{means[2]:.3f}")
    bar.close()
    train_seconds = time.perf_counter() - start
    model.eval()
    heldout = heldout_strings(settings.max_len, settings.heldout_size, task=settings.task)
    heldout_em = exact_match(model, heldout, settings.task, tokenizer, settings.scale)
    card = {
        "task": settings.task,
        "scale": settings.scale,
        "compatibility": settings.compatibility,
        "init": settings.init,
        "max_len": settings.max_len,
        "alphabet": task_alphabet(settings.task),
        "seed": settings.seed,
        "steps": settings.steps,
        "settings": asdict(settings),
        "device": str(device),
        "torch": torch.__version__,
        "train_seconds": round(train_seconds, 1),
        "wall_time_s": round(time.perf_counter() - start, 1),  # training and held-out evaluation
        "cpu_time_s": round(time.process_time() - cpu_start, 1),  # all threads: the cost on an idle machine
        "heldout_exact_match": heldout_em,
        "heldout_size": len(heldout),
        "heldout_seed": HELDOUT_SEED,
        "n_params": count_parameters(model),
        "curve": curve,
        "command": command_line(settings),
    }
    return model, card


def command_line(settings: TrainSettings, out: str = "attention_viz/data/models/NAME") -> str:
    """The shell command that reproduces `settings` (only the flags that differ from the defaults)."""
    default = TrainSettings()
    flags = [f"--{f.name.replace('_', '-')} {getattr(settings, f.name)}" for f in fields(settings)
             if getattr(settings, f.name) != getattr(default, f.name) or f.name in ("task", "scale", "d_k")]
    return " ".join(["python -m attention_viz.train", *flags, "--out", out])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: one flag per TrainSettings field, plus --out, --device and --threads."""
    parser = argparse.ArgumentParser(prog="python -m attention_viz.train", description=__doc__.splitlines()[0])
    for f in fields(TrainSettings):
        flag = "--" + f.name.replace("_", "-")
        if f.name == "task":
            parser.add_argument(flag, choices=TASKS, default=f.default)
        elif f.name == "max_len":
            parser.add_argument(flag, type=int, default=None, help="longest training text (default: the task's own)")
        elif f.name in ("compatibility", "init"):
            parser.add_argument(flag, choices=COMPATIBILITIES if f.name == "compatibility" else INITS, default=f.default)
        elif f.name == "scale":
            parser.add_argument(flag, choices=sorted(SCALE_ALIASES), default=f.default,
                                help="sqrt_dk/on: divide QKᵀ by √d_k (the paper); none/off: plain dot products")
        else:
            parser.add_argument(flag, type=type(f.default), default=f.default)
    parser.add_argument("--out", type=Path, default=None,
                        help="checkpoint path without suffix (default: runs/TASK_dkD_SCALE)")
    parser.add_argument("--device", default="auto", help='"auto" (CUDA when present), "cpu" or "cuda"')
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for torch")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Train from the command line, save the checkpoint and card, print a one-line summary."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    values = {f.name: getattr(args, f.name) for f in fields(TrainSettings)}
    settings = TrainSettings(**{**values, "scale": SCALE_ALIASES[values["scale"]]})
    out = args.out or Path("runs") / f"{settings.task}_dk{settings.d_k}_{settings.scale}"
    model, card = train(settings, device=args.device, progress=not args.quiet)
    card["command"] = command_line(settings, str(out))
    path = save_checkpoint(model, card, out)
    print(
        f"{path}: {settings.task} d_k={settings.d_k} scale={settings.scale} params={card['n_params']} "
        f"steps={settings.steps} held-out exact match={card['heldout_exact_match']:.3f} "
        f"({card['heldout_size']} strings) train {card['train_seconds']:.0f}s"
    )


if __name__ == "__main__":
    main()
