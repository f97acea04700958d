"""Sound as a speech encoder reads it (Whisper): a recording read and resampled to the model's rate by well-kept
libraries (soundfile's libsndfile for WAV, FLAC, OGG, Opus and MP3; soxr to resample), cut to the model's window
(30 s for Whisper) and said so, made into log-mel features by the model's own feature extractor (transformers'), and
the encoder's tokens: one per position of its time axis (20 ms each in Whisper, two feature frames per position).

    frames = Frames.of(model.config, extractor)
    features, note = frames.read("talk.wav")     # [1, mels, frames], what model.forward takes as its source, and
                                                 # "" or "Read the first 30 s of the recording's 2:00:00: ..."
    frames.tokens()                              # ["0.00 s", "0.02 s", ...]: the encoder's and cross maps' keys

This module is the speech modality whole: the decoder's side is text (the model's tokenizer), and everything after
the features is the path every encoder-decoder takes (one pass, maps under encoder / decoder / cross keys).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attention_viz.core.maps import InputAxis

MAX_BYTES = 512 * 2**20  # an encoded file larger than this is refused unread (a recording is read by its start)
SPEECH_TYPES = ("whisper",)


class AudioRefusedError(ValueError):
    """A file or value that is not a recording the model can read; its message names the limit or the fault."""


def is_speech(config) -> bool:
    """Whether a config (or a config.json as read) describes a speech encoder-decoder this module reads."""
    model_type = config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)
    return model_type in SPEECH_TYPES


def _duration(seconds: float) -> str:
    """2:00:00, 1:05, 12.5 s."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, s = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{s:02d}" if hours else f"{minutes}:{s:02d}"


def read_audio(source, rate: int, seconds: float) -> tuple[np.ndarray, str]:
    """A recording as float32 mono samples at `rate`, at most `seconds` of it -> (samples [N], note): the note says
    where a longer one was cut ("" when it was read whole). source: a file path or its bytes (only the first
    `seconds` are decoded, so a two-hour file costs what 30 s do), or (samples, its rate). AudioRefusedError naming
    the fault for a file that is not audio, a damaged one, or one past MAX_BYTES."""
    import soundfile
    import soxr

    if isinstance(source, tuple) and len(source) == 2:
        samples, given_rate = source
        samples = np.asarray(samples, dtype=np.float32)
        if samples.ndim == 2:
            samples = samples.mean(axis=1 if samples.shape[1] <= 8 else 0)
        if samples.ndim != 1 or not isinstance(given_rate, (int, np.integer)) or given_rate <= 0:
            raise AudioRefusedError("samples must be (an array [N] or [N, channels], its rate in Hz as a whole number)")
        total = len(samples) / given_rate
        samples = samples[: int(seconds * given_rate)]
    else:
        if isinstance(source, (str, Path)):
            path = Path(source)
            if not path.is_file():
                raise AudioRefusedError(f"no recording at {path.name!r}")
            size, opened = path.stat().st_size, str(path)
        elif isinstance(source, (bytes, bytearray)):
            size, opened = len(source), io.BytesIO(bytes(source))
        else:
            raise AudioRefusedError(f"a recording is a file path, its bytes, or (samples, rate); got "
                                    f"{type(source).__name__}")
        if size > MAX_BYTES:
            raise AudioRefusedError(f"the file is {size / 2**20:.0f} MiB; a recording is read up to "
                                    f"{MAX_BYTES // 2**20} MiB")
        try:
            with soundfile.SoundFile(opened) as file:
                given_rate, frames = file.samplerate, file.frames
                total = frames / given_rate if frames > 0 else 0.0
                samples = file.read(min(frames, int(seconds * given_rate)), dtype="float32", always_2d=True)
        except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError) as error:
            unknown = any(words in str(error).lower() for words in ("not recognised", "unknown format"))
            raise AudioRefusedError("the recording is damaged: it could not be decoded" if not unknown
                                    else "the file is not a recording (WAV, FLAC, OGG, Opus or MP3) that can be "
                                         "read") from None
        samples = samples.mean(axis=1)
    if not len(samples) or not np.isfinite(samples).all():
        raise AudioRefusedError("the recording holds no samples" if not len(samples)
                                else "the recording holds samples that are not finite numbers")
    if given_rate != rate:
        samples = soxr.resample(samples, given_rate, rate).astype(np.float32)
    note = (f"Read the first {_duration(seconds)} of the recording's {_duration(total)}: the model hears "
            f"{_duration(seconds)} at once." if total > seconds + 1e-6 else "")
    return samples, note


@dataclass(frozen=True)
class Frames:
    """How a speech encoder cuts a recording into tokens: its feature extractor and its time axis."""

    input_name = "input_features"  # the model's keyword for what read() gives
    probed = "recordings"          # what the proof on load runs it on (seeded random features)

    extractor: object             # transformers' feature extractor of the checkpoint (log-mel spectrogram)
    positions: int                # the encoder's positions (Whisper: 1,500 for 30 s)
    mels: int                     # feature bins a frame
    seconds: float                # the window the model hears at once
    rate: int                     # samples a second the extractor takes

    @classmethod
    def of(cls, config, extractor) -> Frames:
        return cls(extractor, int(config.max_source_positions), int(config.num_mel_bins),
                   float(extractor.chunk_length), int(extractor.sampling_rate))

    @property
    def length(self) -> int:
        """The tokens the encoder attends over: one per position of its time axis."""
        return self.positions

    @property
    def frames(self) -> int:
        """Feature frames of the window (two per encoder position in Whisper: its second convolution's stride)."""
        return int(self.extractor.nb_max_frames)

    def tokens(self) -> list[str]:
        """Each encoder position's label: the time it starts at."""
        step = self.seconds / self.positions
        return [f"{i * step:.2f} s" for i in range(self.positions)]

    def axis(self) -> InputAxis:
        """The encoder's positions as core's input axis: each one's time and the seconds it spans."""
        return InputAxis("frames", tuple(self.tokens()), seconds=self.seconds / self.positions)

    def probe(self, batch: int, device, dtype=torch.float32) -> torch.Tensor:
        """Seeded features [batch, mels, frames] of log-mel scale, for the proof on load."""
        generator = torch.Generator().manual_seed(0)
        return torch.randn(batch, self.mels, self.frames, generator=generator).to(device=device, dtype=dtype)

    def read(self, recording) -> tuple[torch.Tensor, str]:
        """A recording (read_audio's sources) -> (input_features [1, mels, frames] as the model's extractor makes them,
        a shorter one padded with silence to the window; the note where a longer one was cut, else "")."""
        samples, note = read_audio(recording, self.rate, self.seconds)
        return self.extractor(samples, sampling_rate=self.rate, return_tensors="pt")["input_features"], note

    def check(self, features: torch.Tensor) -> None:
        """ValueError naming the shape expected unless features is [B, mels, frames] of this model."""
        expected = (self.mels, self.frames)
        if (not isinstance(features, torch.Tensor) or features.dim() != 3 or tuple(features.shape[1:]) != expected
                or not features.is_floating_point()):
            shape = tuple(features.shape) if isinstance(features, torch.Tensor) else type(features).__name__
            raise ValueError(f"a speech model takes input_features of shape [B, {expected[0]}, {expected[1]}] "
                             f"(floats, as model.encode(recording).ids[None] gives them), got {shape}")

    def prompt(self, model, encoder_outputs, start: torch.Tensor) -> torch.Tensor:
        """The decoder's first tokens as Whisper's `generate` writes them before the text (its _retrieve_init_tokens,
        greedy, no timestamps), start [B, 1] (the start of transcript) -> [B, P]: the generation config's forced
        tokens (whisper-tiny's: a language to detect, "transcribe"), the language (the config's, else each row's
        likeliest language token after the start, as generate detects it), the task where the config names one
        (or "transcribe" where it names a language), and "no timestamps"."""
        config = model.generation_config
        task, language = getattr(config, "task", None), getattr(config, "language", None)
        languages, tasks = getattr(config, "lang_to_id", None) or {}, getattr(config, "task_to_id", None) or {}
        init: list = [int(start[0, 0])]
        if task is None and language is None:
            forced = getattr(config, "forced_decoder_ids", None) or getattr(model.config, "forced_decoder_ids", None)
            for position, token in forced or []:
                if position != len(init):
                    break
                init.append(token)
        rows = [list(init) for _ in range(start.size(0))]
        chosen = None
        if language is not None:
            chosen = [languages[language if language in languages else f"<|{language.lower()}|>"]] * len(rows)
        elif languages and (len(init) <= 1 or init[1] is None):
            with torch.no_grad():
                logits = model(encoder_outputs=encoder_outputs, decoder_input_ids=start, use_cache=False).logits
            ids = torch.tensor(sorted(languages.values()), device=start.device)
            chosen = ids[logits[:, -1, ids].argmax(-1)].tolist()  # each row's likeliest language
        for row, token in zip(rows, chosen or [None] * len(rows)):
            if token is not None:
                row[1:2] = [token]
            if task is not None:  # the config's task replaces a forced one, or is added
                found = [i for i, t in enumerate(row) if t in tasks.values()]
                if found:
                    row[found[0]] = tasks[task]
                else:
                    row.append(tasks[task])
            elif language is not None and tasks and not any(t in tasks.values() for t in row):
                row.append(tasks["transcribe"])
            stop = getattr(config, "no_timestamps_token_id", None)
            if stop is not None and not getattr(config, "return_timestamps", False) and row[-1] != stop:
                row.append(stop)
        return torch.tensor([[t for t in row if t is not None] for row in rows], device=start.device)
