"""The package's layers as the tree shows them: each subpackage imports only those below it."""

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attention_viz"
# Lowest first; a module may import its own layer and the layers listed before it, never one after.
# explorer (the browser-side views and the packing of a run) sits above draw and below service, which packs runs
# with it; webui uses both. labview (the lab's script and style, drawn in the browser) takes only explorer's palette.
# hub (real models through transformers, an optional extra) sits on core; the layers above import it only inside
# the functions that run a real model, so the package works without transformers.
# server (the Gradio server's operations: static files, queueing, sessions, liveness, process tuning) sits below
# webui, which wires the page and starts the server with it; both import Gradio, server only through its
# gradio_internals module where it reaches past Gradio's public API.
LAYERS = ["core", "fast", "hub", "data", "lab", "importance", "qkstats", "analysis", "draw", "explorer", "labview", "train", "service",
          "server", "webui"]
THIRD_PARTY_HOME = {"gradio": {"server", "webui"}, "matplotlib": {"draw"}, "transformers": {"hub"}}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "attention_viz" and len(parts) > 1 else None


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names if node.module == "attention_viz"]
    return found


def sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if len(relative.parts) > 1:
            yield relative.parts[0], path
        elif relative.stem != "__init__":
            yield relative.stem, path


def test_every_subpackage_is_a_known_layer():
    assert {layer for layer, _ in sources()} <= set(LAYERS)


def test_nothing_imports_upward():
    upward = []
    for layer, path in sources():
        for module in imports(path):
            target = layer_of(module)
            if target in LAYERS and LAYERS.index(target) > LAYERS.index(layer):
                upward.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert not upward, upward


def test_gradio_only_in_the_web_ui_matplotlib_only_in_draw_transformers_only_in_hub():
    misplaced = [f"{path.relative_to(PACKAGE)} imports {module}" for layer, path in sources()
                 for module in imports(path) for library, homes in THIRD_PARTY_HOME.items()
                 if module.split(".")[0] == library and layer not in homes]
    assert not misplaced, misplaced


def test_the_core_needs_only_torch_and_numpy():
    allowed = {"torch", "numpy", "attention_viz"} | set(sys.stdlib_module_names)  # the standard library is no dependency
    extra = {module for layer, path in sources() if layer == "core" for module in imports(path)
             if module.split(".")[0] not in allowed}
    assert "operator" in allowed and "gradio" not in allowed and "safetensors" not in allowed
    assert not extra, extra


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_imports_itself_round_a_circle():
    """Within the package, no chain of imports (a function's own import and one for type checking included) leads
    from a module back to itself: each module can be read, and tested, knowing only those it names."""
    modules = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    graph = {}
    for name, path in modules.items():
        targets = set()
        named = [f"{node.module}.{alias.name}" for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.ImportFrom) and node.module for alias in node.names]
        for module in imports(path) + named:
            while module and module not in modules:  # `from attention_viz.x import y` names x (or x.y, a module)
                module = module.rpartition(".")[0]
            if module and module != name and module != "attention_viz" and not name.startswith(module + "."):
                targets.add(module)
        graph[name] = targets
    circles, state = [], {}

    def visit(name, path):
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                circles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not circles, circles


def test_the_page_asks_the_service_through_its_face():
    """webui imports the service's names from the package (service/__init__.py's face), never from its modules."""
    reaching = [f"{path.relative_to(PACKAGE)} imports {module}" for layer, path in sources() if layer == "webui"
                for module in imports(path) if module.startswith("attention_viz.service.")]
    assert not reaching, reaching
