"""Where tensors live: `device="auto"` picks CUDA when present, else the CPU."""

from __future__ import annotations

import torch


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Turn "auto", "cpu", "cuda", "cuda:1" or a torch.device into a torch.device."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was asked for, but CUDA is not available here")
    return torch.device(device)
