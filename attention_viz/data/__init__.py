"""Tokenizer, toy tasks, checkpoints (safetensors + JSON card) and the shipped models, as package data."""

from .checkpoints import CheckpointError, UnsafeCheckpointError

__all__ = ["CheckpointError", "UnsafeCheckpointError"]
