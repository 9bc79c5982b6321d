"""The package's import graph: no module imports another in a circle, and floors hold.

The graph is read from the source with `ast`, without importing anything. An edge
A → B is an `import keras_transformer.B...` or `from keras_transformer.B... import`
anywhere in A: at module level or inside a function. Both count: a function-level
import is how a command defers TensorFlow, but it is still a dependency, and a
circle through one is still a circle in the design. Importing `pkg.mod` counts as
an edge to `pkg.mod` only, not to `pkg/__init__.py` (package `__init__` files load
their names lazily or re-export their own submodules). The rules are those of
docs/architecture.md.
"""

import ast
import json
import os
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_transformer"

# Part of the package (a top-level module or package, or one module inside a
# package, the longest match wins) → floor. A module imports only from its own
# floor or floors below (same floor: no circle, see
# test_no_module_imports_another_in_a_circle).
FLOORS = {
    "": 0,  # keras_transformer/__init__.py: `__version__`; its public names load lazily
    "constants": 0,
    "files": 0,
    "lazy": 0,
    "versions": 0,
    "ops": 0,
    "layers": 1,
    "models": 2,
    "decoding": 2,
    "data": 2,
    "runs": 3,
    # The task objects: a model with its tokenizers; they make the export modules.
    "tasks": 3,
    # Command-line arguments several commands share (`--weights` names a run's choices).
    "arguments": 3,
    "export": 3,
    "evaluation": 3,
    "plots": 3,
    "training": 4,
    # Plain dataclasses of settings, stored in the run folder and read by `runs.folder`.
    "training.config": 2,
    # Loss and metric math (Keras and TensorFlow only): evaluation scores a language
    # model with the perplexity metric it was trained with.
    "training.losses": 2,
    # The optimizer and its schedule: the task objects compile with them.
    "training.optimizer": 2,
    "training.schedule": 2,
    "serving": 4,
    "translate": 4,
    "cli": 5,
    "__main__": 5,
}

# Imports a floor allows but the design forbids (docs/architecture.md).
FORBIDDEN = {
    # A layer is model code only: no data pipeline, training loop, export or server.
    "layers": {"data", "training", "export", "serving"},
    # A server runs from a SavedModel alone: no Keras model code, no training.
    "serving": {"training", "models", "layers"},
}


# Modules the command line reads before it decides to load TensorFlow.
LIGHT_MODULES = [
    "keras_transformer.constants",
    "keras_transformer.versions",
    "keras_transformer.files",
    "keras_transformer.lazy",
    "keras_transformer.runs",
    "keras_transformer.runs.folder",
    "keras_transformer.runs.checkpoints",
    "keras_transformer.runs.history",
    "keras_transformer.runs.weights",
    "keras_transformer.runs.loading",
    "keras_transformer.runs.average_command",
    "keras_transformer.arguments",
    "keras_transformer.cli",
    "keras_transformer.ops.checks",
    "keras_transformer.ops.choices",
    "keras_transformer.models.config",
    "keras_transformer.models.task_model",
    "keras_transformer.training.config",
]
HEAVY = ("tensorflow", "keras", "tensorflow_text")


def _modules():
    """{dotted module name: path} of every module of the package."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _import_graph():
    """{module: {imported module: line}} for imports of the package's own modules."""
    modules = _modules()

    def resolve(name):
        # `from pkg.mod import name` names a module, or a name inside one.
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                raise AssertionError(f"{path}:{node.lineno}: use absolute imports")
            else:
                continue
            for name in names:
                if name.split(".")[0] != "keras_transformer":
                    continue
                target = resolve(name)
                if target and target != module:
                    edges.setdefault(target, node.lineno)
    return graph


def _part(module):
    """keras_transformer.serving.server → "serving"; keras_transformer → ""."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _floor(module):
    """The floor of a module: that of its own entry in FLOORS, else of its part."""
    inner = ".".join(module.split(".")[1:3])
    return FLOORS.get(inner, FLOORS.get(_part(module), 0))


def _cycles(graph):
    """The import circles, each as a list of modules (one per strongly connected set)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == module:
                    break
            if len(members) > 1 or module in graph.get(module, ()):
                cycles.append(sorted(members))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_the_graph_sees_module_and_function_level_imports():
    graph = _import_graph()
    # Module level: layers.attention imports the attention formula.
    assert "keras_transformer.ops.attention" in graph["keras_transformer.layers.attention"]
    # Function level: `summary` builds its model inside `run`.
    assert "keras_transformer.models.transformer" in graph["keras_transformer.models.summary"]


def test_cycle_finder_finds_a_circle():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b": 1}, "b": {}}) == []


def test_no_module_imports_another_in_a_circle():
    graph = _import_graph()
    described = []
    for cycle in _cycles(graph):
        edges = [
            f"{source} → {target} (line {graph[source][target]})"
            for source in cycle
            for target in cycle
            if target in graph[source]
        ]
        described.append("; ".join(edges))
    assert described == [], "import circles:\n" + "\n".join(described)


def test_every_part_of_the_package_has_a_floor():
    unknown = sorted({_part(module) for module in _modules()} - set(FLOORS))
    assert unknown == [], (
        f"new parts {unknown}: give each a floor in FLOORS here and in docs/architecture.md"
    )


def test_modules_import_only_from_their_floor_or_below():
    wrong = []
    for module, targets in sorted(_import_graph().items()):
        source = _part(module)
        for target, line in sorted(targets.items()):
            imported = _part(target)
            if _floor(target) > _floor(module):
                wrong.append(f"{module}:{line} (floor {_floor(module)}) imports {target} "
                             f"(floor {_floor(target)})")
            if imported in FORBIDDEN.get(source, ()):
                wrong.append(f"{module}:{line} imports {target}: {source} never imports {imported}")
    assert wrong == [], "\n".join(wrong)


def test_light_modules_import_neither_keras_nor_tensorflow():
    modules = [name for name in LIGHT_MODULES if name in _modules()]
    assert "keras_transformer.models.config" in modules
    script = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
        cwd=PACKAGE.parent, env=dict(os.environ, PYTHONPATH=str(PACKAGE.parent)),
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
