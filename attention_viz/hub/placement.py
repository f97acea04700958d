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
- a dtype one of the devices cannot run (a tiny matmul and softmax in that dtype, tried on each device);
- weights that do not fit where they are to go (`check_room`): each weight's bytes in the dtype asked for, from the
  model built on the meta device (or, for a model loaded whole on one device, from its safetensors headers), summed
  per place, against each GPU's free memory and the CPU's available memory as accelerate reads them
  (`accelerate.utils.get_max_memory`), and against the offload folder's free disk for what transformers writes
  there. Layers on disk are read from the model's own safetensors files, so only the weights transformers converts
  while loading (a mixture of experts' merged experts) are written to the offload folder; a strategy ("auto", ...)
  fills the GPUs, then the CPU, then disk, and is refused only when what spills to disk would be written there and
  the folder has no room for it.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from itertools import chain
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


def empty_model(model_class, config) -> torch.nn.Module:
    """The model built on PyTorch's meta device: its modules and weights' shapes, no weight read or allocated."""
    from accelerate import init_empty_weights

    with init_empty_weights():
        return model_class.from_config(config)


def check_modules(device_map: dict, empty: torch.nn.Module) -> None:
    """ValueError when a map names a module the model (`empty`, built on the meta device: no weight read) does not
    have, or leaves one of its weights without a place."""
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


def shown_bytes(n: int) -> str:
    """A size as a message gives it: "16.1 GB", "310 MB", "12 kB"."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}" if n < 10 * size else f"{n / size:.0f} {unit}"
    return f"{n} B"


def weight_bytes(empty: torch.nn.Module, dtype: torch.dtype) -> dict[str, int]:
    """Each weight's bytes as loaded in `dtype` (a floating weight in it, another in its own dtype), by name, from
    the model built on the meta device (`empty`: shapes only)."""
    return {name: t.numel() * (dtype.itemsize if t.is_floating_point() else t.element_size())
            for name, t in chain(empty.named_parameters(), empty.named_buffers())}


def header_bytes(files, dtype: torch.dtype) -> int:
    """The bytes of every tensor in these safetensors files as loaded in `dtype`, from their headers alone."""
    from safetensors import safe_open

    total = 0
    for file in files:
        with safe_open(str(file), framework="pt") as stored:
            for name in stored.keys():
                piece = stored.get_slice(name)
                kind = piece.get_dtype()  # "F32", "BF16", "I64", "BOOL", "F8_E4M3", ...
                bits = int("".join(c for c in kind.split("_")[0] if c.isdigit()) or 8)
                size = dtype.itemsize if kind.startswith(("F", "BF")) else bits // 8
                total += math.prod(piece.get_shape()) * size
    return total


def container_free(root: str | Path = "/sys/fs/cgroup") -> int | None:
    """Bytes the container's memory limit leaves free (its cgroup's limit less what it uses, the page cache it can drop
    not counted), or None where no limit is set: the host's available memory, which accelerate reads, is not what a
    container (a Space, a pod) may use. cgroup v2 (memory.max) or v1 (memory/memory.limit_in_bytes)."""
    root = Path(root)
    for limit, used, stat, cache in ((root / "memory.max", root / "memory.current", root / "memory.stat",
                                      "inactive_file"),
                                     (root / "memory" / "memory.limit_in_bytes", root / "memory" / "memory.usage_in_bytes",
                                      root / "memory" / "memory.stat", "total_inactive_file")):
        try:
            most, now = limit.read_text().strip(), int(used.read_text())
        except (OSError, ValueError):
            continue
        if most == "max" or not most.isdigit() or int(most) >= 2**60:  # no limit (v1 writes one near 2^63)
            return None
        stats = dict(line.split() for line in stat.read_text().splitlines() if line.count(" ") == 1) \
            if stat.exists() else {}
        return max(0, int(most) - now + int(stats.get(cache, 0)))
    return None


def room(offload_folder=None) -> dict:
    """Bytes free for weights: {GPU index: free memory, "cpu": available memory} as accelerate reads them (its
    `get_max_memory`), the CPU's no more than the container's limit leaves (container_free), and "disk": the offload
    folder's free disk (absent without a folder)."""
    from accelerate.utils import get_max_memory

    free = {place: int(n) for place, n in get_max_memory().items() if isinstance(place, int) or place == "cpu"}
    container = container_free()
    if container is not None and "cpu" in free:
        free["cpu"] = min(free["cpu"], container)
    if offload_folder is not None:
        folder = Path(offload_folder).expanduser()
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        free["disk"] = shutil.disk_usage(folder).free
    return free


def place_key(place):
    """A device map's value as room() names places: a GPU index, "cpu" or "disk"."""
    device = target(place, repr)
    if device == "disk" or device.type != "cuda":
        return device if device == "disk" else device.type
    return device.index or 0


def written_to_disk(empty: torch.nn.Module) -> bool:
    """Whether transformers converts this model's weights while loading them (a WeightConverter: a mixture of
    experts' merged experts), and so writes those it offloads to the offload folder instead of reading them from
    the model's own safetensors files."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightConverter

        return any(isinstance(step, WeightConverter) for step in get_model_conversion_mapping(empty) or ())
    except (ImportError, AttributeError, TypeError):
        return True  # not known: counted against the folder, the safe side


def check_room(device_map, sizes: dict[str, int], free: dict, written: bool, dtype: torch.dtype) -> None:
    """ValueError when the weights (`sizes`: name -> bytes) do not fit where `device_map` puts them: a place's share
    against its free bytes (`free`, room()'s), disk's against the offload folder's only when `written` (transformers
    writes them there; otherwise it reads them from the model's own files). A strategy: the GPUs and the CPU first,
    what spills over on disk."""
    total = sum(sizes.values())
    kind = str(dtype).removeprefix("torch.")
    if isinstance(device_map, str):
        memory = sum(n for place, n in free.items() if place != "disk")
        spill = total - memory
        if spill > 0 and written and spill > free.get("disk", 0):
            where = (f"its offload folder's disk has {shown_bytes(free['disk'])} free" if "disk" in free
                     else "no offload_folder was given")
            raise ValueError(f"its weights are {shown_bytes(total)} in {kind}; this machine's memory holds "
                             f"{shown_bytes(memory)}, and the {shown_bytes(spill)} left over are converted while "
                             f"loading and written to disk, but {where}; name an offload_folder on a disk with "
                             "room, or load it in a smaller dtype")
        return
    need: dict = {}
    for name, n in sizes.items():
        keys = [key for key in device_map if key == "" or name == key or name.startswith(f"{key}.")]
        if keys:
            place = place_key(device_map[max(keys, key=len)])
            need[place] = need.get(place, 0) + n
    for place, n in need.items():
        if (place == "disk" and not written) or place not in free:
            continue  # read from the model's own safetensors files, where they are; a device accelerate does not size
        if n > free.get(place, 0):
            shown = f"cuda:{place}" if isinstance(place, int) else place
            space = "its offload folder's disk" if place == "disk" else shown
            instead = ("name an offload_folder on a disk with room" if place == "disk" else
                       "map some of its layers to 'disk' (with an offload_folder), or load it in a smaller dtype")
            raise ValueError(f"its device map puts {shown_bytes(n)} of its {shown_bytes(total)} of weights ({kind}) "
                             f"on {shown}, and {space} has {shown_bytes(free.get(place, 0))} free; {instead}")


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
    empty = empty_model(model_class, config)
    if isinstance(device_map, dict):
        check_modules(device_map, empty)
    check_offload(device_map, offload_folder)
    check_dtype(dtype, devices)
    check_room(device_map, weight_bytes(empty, dtype), room(offload_folder), written_to_disk(empty), dtype)
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
