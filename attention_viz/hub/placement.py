"""Where a real model's layers live: the checks of a placement before any weight is read, and the weights of a model
whose layers accelerate has offloaded.

`load_pretrained(..., device_map=..., offload_folder=...)` hands placement to accelerate, as transformers'
`from_pretrained` does: a device map ("auto", "balanced", "sequential", or {module name: "cpu" | "disk" | "cuda:0"
| 0 ...}) spreads layers over GPUs, the CPU and disk; accelerate's hooks move the activations from device to device.
Before that, `check_placement` refuses, with a sentence naming what to change:

- a device that is not there (a GPU index past those present, CUDA or MPS where there is none, a name torch does not
  know);
- a map naming a module the model does not have, or leaving some of its weights without a place (checked on a copy
  of the model built on PyTorch's meta device: no weight is read or allocated);
- layers mapped to "disk" with no offload folder, or an offload folder that cannot be written;
- a dtype one of the devices cannot run (a tiny matmul and softmax in that dtype, tried on each device).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate's own placements
PLACES = ("cpu", "disk")  # where a map may put a module besides a GPU


def target(place, shown_device) -> torch.device | str:
    """One value of a device map as a device ("disk" kept as a word); ValueError naming the value if it is none."""
    if isinstance(place, bool):
        raise ValueError(f"{place!r} is not a device")
    if isinstance(place, int):
        return torch.device("cuda", place)
    if isinstance(place, torch.device):
        return place
    if place in PLACES[1:]:
        return place
    try:
        return torch.device(place)
    except (RuntimeError, TypeError):
        raise ValueError(f"{shown_device(place)} is not a device torch knows (use 'cpu', 'disk', 'cuda:0', or a GPU "
                         "index)") from None


def absent(device: torch.device) -> str:
    """Why `device` is not on this machine ("" when it is)."""
    if device.type == "cpu" or device.type == "meta":
        return "" if device.type == "cpu" else "the meta device holds no weights"
    if device.type == "cuda":
        count = torch.cuda.device_count()
        if count == 0:
            return "this machine has no CUDA GPU"
        index = device.index or 0
        return "" if index < count else f"this machine has {count} CUDA GPU{'s' * (count > 1)} (0 to {count - 1})"
    if device.type == "mps":
        return "" if torch.backends.mps.is_available() else "this machine has no MPS device"
    backend = getattr(torch, device.type, None)
    available = getattr(backend, "is_available", None)
    return "" if callable(available) and available() else f"this machine has no {device.type} device"


def mapped_devices(device_map) -> list:
    """The distinct places a device map names, in its order (a strategy string: none named)."""
    if isinstance(device_map, str):
        return []
    values = device_map.values() if isinstance(device_map, dict) else [device_map]
    return list(dict.fromkeys(values))


def check_devices(device_map) -> list[torch.device]:
    """The devices a map computes on (disk is computed on the first of them, or the CPU); ValueError naming a value
    that is no device or one that is not here."""
    if isinstance(device_map, str) and device_map in STRATEGIES:
        return [torch.device("cuda", i) for i in range(torch.cuda.device_count())] + [torch.device("cpu")]
    devices = []
    for place in mapped_devices(device_map):
        device = target(place, repr)
        if device == "disk":
            continue
        why = absent(device)
        if why:
            raise ValueError(f"it is to be placed on {place!r}, but {why}; map it to a device that is there "
                             "(or to 'cpu' or 'disk')")
        devices.append(device)
    return devices or [torch.device("cpu")]


def check_modules(device_map: dict, model_class, config) -> None:
    """ValueError when a map names a module the model (built on the meta device: no weight read) does not have, or
    leaves one of its weights without a place."""
    from accelerate import init_empty_weights

    with init_empty_weights():
        empty = model_class.from_config(config)
    modules = {name for name, _ in empty.named_modules()}  # and its tensors, which transformers places by name
    tensors = {name for name, _ in empty.named_parameters()} | {name for name, _ in empty.named_buffers()}
    unknown = [name for name in device_map if name not in modules | tensors]
    if unknown:
        near = sorted(name for name in modules if name.count(".") <= 1 and name)[:6]
        raise ValueError(f"its device map names {unknown[0]!r}, which is no module of this model (its modules "
                         f"include {', '.join(repr(name) for name in near)}; '' is the whole model)")
    unplaced = [name for name, _ in empty.named_parameters()
                if not any(key == "" or name == key or name.startswith(f"{key}.") for key in device_map)]
    if unplaced:
        more = f" (nor {len(unplaced) - 1} more weights)" if len(unplaced) > 1 else ""
        raise ValueError(f"its device map gives {unplaced[0]} no place{more}; add its module (or '' for "
                         "everything) to the map")


def check_offload(device_map, offload_folder) -> None:
    """ValueError when a map offloads to disk with no folder, or when the folder cannot be written (a test file is
    written in it and removed; a folder that is not there is created)."""
    to_disk = "disk" in mapped_devices(device_map)
    if offload_folder is None:
        if to_disk:
            raise ValueError("its device map puts layers on 'disk' but no offload_folder was given; name a folder "
                             "that can be written")
        return
    folder = Path(offload_folder).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ValueError(f"its offload folder {folder.name or str(folder)!r} cannot be written ({reason}); name a "
                         "folder this process can write") from None


def check_dtype(dtype, devices: list[torch.device]) -> None:
    """ValueError when `dtype` is no floating dtype, or one of `devices` cannot run a matmul and softmax in it."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"its weights cannot be {dtype} (use torch.float32, torch.bfloat16, torch.float16 or "
                         "torch.float64)")
    for device in devices:
        try:
            a = torch.ones(2, 4, dtype=dtype, device=device)  # (2, 4)
            torch.softmax(a @ a.T, dim=-1)  # (2, 2)
        except (RuntimeError, NotImplementedError, TypeError) as error:
            raise ValueError(f"{device} cannot compute in {dtype} ({str(error).splitlines()[0][:120]}); use "
                             "torch.float32 or torch.bfloat16 there") from None


def check_placement(device_map, offload_folder, dtype, model_class, config):
    """Every check above, before any weight is read; ValueError with the reason, for the loader to refuse with.
    Returns the map as transformers takes it (a device alone: {"": device})."""
    if not isinstance(device_map, (str, dict, int, torch.device)):
        raise ValueError(f"its device_map {device_map!r} is none of 'auto', a dict of module names, or a device")
    if isinstance(device_map, str) and device_map not in STRATEGIES:
        device_map = {"": device_map}
    elif isinstance(device_map, (int, torch.device)):
        device_map = {"": device_map}
    devices = check_devices(device_map)
    if isinstance(device_map, dict):
        check_modules(device_map, model_class, config)
    check_offload(device_map, offload_folder)
    check_dtype(dtype, devices)
    return device_map


def weights(model):
    """(name, tensor) of each of the model's weights, an offloaded one (on the meta device in the model) read, one at
    a time, from where accelerate keeps it (the CPU or the offload folder)."""
    for module_name, module in model.named_modules():
        stored = getattr(getattr(module, "_hf_hook", None), "weights_map", None)
        for name, parameter in module.named_parameters(recurse=False):
            if parameter.device.type == "meta" and stored is not None:
                parameter = stored[name]
            yield (f"{module_name}.{name}" if module_name else name), parameter


def weight_of(module, name: str = "weight") -> torch.Tensor:
    """A module's own weight, read from where accelerate keeps it when the module is offloaded (on the execution
    device of the module's hook)."""
    parameter = getattr(module, name)
    hook = getattr(module, "_hf_hook", None)
    stored = getattr(hook, "weights_map", None)
    if parameter is None or parameter.device.type != "meta" or stored is None:
        return parameter
    return stored[name].to(getattr(hook, "execution_device", None) or "cpu")


def input_device(model) -> torch.device:
    """Where the model's inputs go: the device its input embedding computes on (accelerate's execution device when
    the model is placed by a device map, else its weight's device)."""
    embedding = model.get_input_embeddings()
    execution = getattr(getattr(embedding, "_hf_hook", None), "execution_device", None)
    if execution is not None:
        return torch.device("cuda", execution) if isinstance(execution, int) else torch.device(execution)
    weight = getattr(embedding, "weight", None)  # an image model's patch embedding holds its weight in a convolution
    device = weight.device if isinstance(weight, torch.Tensor) else next(embedding.parameters()).device
    return torch.device("cpu") if device.type == "meta" else device
