"""Tokenizer, toy tasks, checkpoints (safetensors + JSON card) and the shipped models, as package data."""
