"""The import graph of ``rlscale``: no cycle between modules, and every import goes down the layers.

Every module under ``rlscale/`` is parsed with ``ast``; every import counts, at any depth (function-level
imports included, since they run too). ``from rlscale.a import b`` is an edge to the module ``rlscale.a.b``
when that is a module, else to ``rlscale.a``.

The layers, lowest first (a module imports from its own package or from a lower layer):

0. ``rlscale`` (the version), ``knobs`` (config fields with their documentation and bounds), ``paths``, ``options``,
   ``gpus``, ``runfolder`` (the run folder's files), ``tables`` (rich tables that fit the console): utilities that
   import nothing else of rlscale.
1. ``config``: the run config's schema and composition.
2. ``core``: the shared types (completions, train batches, step results, think tags) and the generator,
   learner and tokenizer protocols.
3. ``rl`` (advantages, aggregation, filters, losses) and ``tasks`` (prompts and verifiers), side by side.
4. ``engines``: generators, learners, kernels, models.
5. ``train``: one run (components, rollouts, off-policy sources, loop).
6. ``fit``: sigmoid fits of run folders.
7. ``sweep`` (runs many ``train`` runs, prunes with ``fit``) and ``plan`` (reads fits), side by side.
8. ``report``; 8.5. ``testing`` (synthetic inputs for tests and benchmarks; nothing below imports it).
9. the command line: ``rlscale.cli``, one module per command. No other package imports a command.
   (``python -m rlscale.train RUN_DIR``, what a job runs, is ``train``'s own ``__main__`` and stays in its
   layer: it reads the run folder and calls ``train.entry``.)

``rl`` imports nothing of ``config``: the config classes of its options are declared with ``knobs`` beside their
code, and ``config`` reaches them (and the tables of option names in ``rl``) by ``module:attribute`` strings,
imported when chosen (``config.axis``), never by an import statement.

``config`` holds the option names of every axis (``config.registry``), so validation reads no package above
it; ``tracking`` (the experiment-tracking sinks) reads its logger names there, so it sits just above
``config``, at layer 1.5.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = Path(__file__).resolve().parents[2] / "rlscale"

LAYERS: Dict[str, float] = {
    "rlscale": 0, "rlscale.knobs": 0, "rlscale.paths": 0, "rlscale.options": 0, "rlscale.gpus": 0, "rlscale.runfolder": 0,
    "rlscale.tables": 0,
    "rlscale.config": 1,
    "rlscale.tracking": 1.5,
    "rlscale.core": 2,
    "rlscale.rl": 3, "rlscale.tasks": 3,
    "rlscale.engines": 4,
    "rlscale.train": 5,
    "rlscale.fit": 6,
    "rlscale.sweep": 7, "rlscale.plan": 7,
    "rlscale.report": 8,
    "rlscale.testing": 8.5,
    "rlscale.cli": 9,
}


def module_names(root: Path = PACKAGE) -> Dict[str, Path]:
    """Dotted name -> file of every module under ``root`` (a package is named by its ``__init__``)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports_of(name: str, path: Path, modules: Set[str]) -> Set[str]:
    """The rlscale modules ``name`` imports, anywhere in its file."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "rlscale")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "rlscale":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
    return {m for m in found if m in modules and m != name}


def import_graph(root: Path = PACKAGE) -> Dict[str, Set[str]]:
    names = module_names(root)
    return {name: imports_of(name, path, set(names)) for name, path in names.items()}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components with more than one module (or a module importing itself), by
    Tarjan's algorithm; each is a cycle of imports."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer_of(module: str) -> float:
    prefixes = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    if not prefixes:
        raise KeyError(f"{module}: no layer; add its package to LAYERS")
    return LAYERS[max(prefixes, key=len)]


def package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def upward_imports(graph: Dict[str, Set[str]]) -> List[str]:
    """Imports between packages that do not go down the layers: to a higher layer, or sideways to another
    package of the same layer."""
    bad = []
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = layer_of(target), layer_of(source)
            if package_of(source) == package_of(target) or low < high:
                continue
            bad.append(f"{source} (layer {layer_of(source)}) imports {target} (layer {layer_of(target)})")
    return bad


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_imports_go_down_the_layers():
    assert upward_imports(import_graph()) == []


def test_the_loop_sees_the_backends_through_their_interfaces():
    """``train.loop`` imports no generator, learner or model module: the backends reach it built, through
    ``train.components`` and the protocols of ``core.protocols``."""
    backends = ("rlscale.engines.generators", "rlscale.engines.learners", "rlscale.engines.models")
    assert [m for m in import_graph()["rlscale.train.loop"] if m.startswith(backends)] == []


def test_rl_receives_callables_and_numbers_and_imports_nothing_of_config():
    """The RL objective's modules take their options resolved (functions, config classes declared with
    ``rlscale.knobs``), so none imports ``rlscale.config``."""
    graph = import_graph()
    assert [(m, t) for m, targets in graph.items() if m.startswith("rlscale.rl")
            for t in targets if t.startswith("rlscale.config")] == []


RUN_CONFIG_READERS = {
    "rlscale.config": "composes, types, validates and documents the whole run config",
    "rlscale.train.components": "the builder: hands each component its typed section or a settings bundle",
    "rlscale.train.entry": "a run's entry: reads and validates config.yaml, hands the config to the loop",
    "rlscale.train.loop": "the run itself: builds its components (train.components), its cadence, its identity",
    "rlscale.train.checkpoint": "the run folder's identity: a hash of the whole config",
    "rlscale.engines.memory": "the memory estimate of a whole job (model, batch, budgets, launcher shape)",
}
"""The modules that may take the whole ``RunConfig``, with the reason (docs/architecture.md lists them too). Every
other module is handed its own typed section or a settings bundle (``GeneratorSettings``, ``LearnerSettings``,
``SourceInputs``, ``PolicyInputs``, ``TrackedRun``), built by ``train.components``."""


def names_run_config(path: Path) -> bool:
    """Whether the module's code names ``RunConfig``: imports it, annotates with it or reads it (docstrings and
    comments aside)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Name) and node.id == "RunConfig" or isinstance(node, ast.alias)
                and node.name.rpartition(".")[2] == "RunConfig" or isinstance(node, ast.Attribute)
                and node.attr == "RunConfig"):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip() == "RunConfig":
            return True  # a quoted annotation
    return False


def test_only_the_run_s_own_modules_take_the_whole_run_config():
    """Components (generators, learners, models, tasks, trackers, rollout sources, rl) get their section or a
    bundle; a new module that takes ``RunConfig`` fails here until it is one of ``RUN_CONFIG_READERS``."""
    readers = [name for name, path in module_names().items() if names_run_config(path)]
    allowed = tuple(RUN_CONFIG_READERS)
    assert [m for m in readers if not any(m == a or m.startswith(a + ".") for a in allowed)] == []
    assert all(any(m == a or m.startswith(a + ".") for m in readers) for a in allowed)  # no stale entry


def test_a_component_that_takes_the_run_config_is_found(tmp_path):
    module = tmp_path / "sink.py"
    module.write_text('"""Built from RunConfig."""\nfrom rlscale.config import schema\n\n'
                      "def sink(cfg: schema.RunConfig):\n    return cfg\n")
    assert names_run_config(module)
    module.write_text('"""Built from its section, never the RunConfig."""\n\ndef sink(cfg):\n    return cfg\n')
    assert not names_run_config(module)


def test_every_module_has_a_layer():
    for module in import_graph():
        layer_of(module)


def test_a_planted_cycle_is_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"], ["e"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_real_graph_with_a_planted_cycle_fails():
    graph = import_graph()
    assert "rlscale.core.types" in graph["rlscale.train.batch"]
    graph["rlscale.core.types"] = graph["rlscale.core.types"] | {"rlscale.train.batch"}
    assert ["rlscale.core.types", "rlscale.train.batch"] in cycles(graph)
    assert upward_imports(graph) == ["rlscale.core.types (layer 2) imports rlscale.train.batch (layer 5)"]


def test_an_import_against_the_flow_is_found():
    graph = {"rlscale.engines.learners.torch_learner": {"rlscale.train.batch", "rlscale.core.types"},
             "rlscale.rl.losses": {"rlscale.tasks.base"}, "rlscale.cli.plan": {"rlscale.cli.fit"},
             "rlscale.train.loop": {"rlscale.engines.learners.torch_learner"},
             "rlscale.sweep.job": {"rlscale.cli.run", "rlscale.train.entry"}}
    assert upward_imports(graph) == [
        "rlscale.engines.learners.torch_learner (layer 4) imports rlscale.train.batch (layer 5)",
        "rlscale.rl.losses (layer 3) imports rlscale.tasks.base (layer 3)",
        "rlscale.sweep.job (layer 7) imports rlscale.cli.run (layer 9)",
    ]


def test_function_level_and_relative_imports_count(tmp_path):
    pkg = tmp_path / "rlscale"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import low\n")
    (pkg / "sub" / "low.py").write_text("def f():\n    from rlscale.sub import high\n")
    (pkg / "sub" / "high.py").write_text("from .low import f\nimport rlscale\n")
    graph = import_graph(pkg)
    assert graph == {"rlscale": set(), "rlscale.sub": {"rlscale.sub.low"}, "rlscale.sub.low": {"rlscale.sub.high"},
                     "rlscale.sub.high": {"rlscale.sub.low", "rlscale"}}
    assert cycles(graph) == [["rlscale.sub.high", "rlscale.sub.low"]]
