"""Packaging: no import cycles, the version from the metadata, every shipped name resolvable,
and the wheel's data lists (setup.py, setup.cfg) covering every shipped file.

The non-editable install itself (``pip install .`` into a fresh venv, run from another
directory) is proven by ``.ci/run``'s install check (``.ci/install_check.sh``).
"""

from __future__ import annotations

import ast
import configparser
import fnmatch
import importlib.metadata
from pathlib import Path

import pytest

import accel_sim
from accel_sim import resources
from accel_sim.errors import UserInputError

PACKAGE = Path(accel_sim.__file__).resolve().parent
ROOT = PACKAGE.parent

#: Cycles through imports inside functions that are known and not yet removed (each one a
#: strongly connected component). Module-level cycles are never allowed. Empty this as they go.
KNOWN_FUNCTION_LEVEL_CYCLES: set[frozenset[str]] = set()


# --------------------------------------------------------------------------- import graph
def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.Module, module_level_only: bool):
    """Import statements that run: at module level (and in its plain if/try blocks), plus, unless
    ``module_level_only``, inside functions and classes. ``if TYPE_CHECKING:`` blocks never run."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            if not module_level_only:
                stack.extend(ast.iter_child_nodes(node))
        else:
            stack.extend(ast.iter_child_nodes(node))


def _imports(name: str, path: Path, modules: dict[str, Path], module_level_only: bool) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8")), module_level_only):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:  # `from pkg import module` imports the module
            sub = f"{base}.{alias.name}"
            targets.add(sub if sub in modules else base)
    out = set()
    for target in targets:
        while target and target not in modules:  # `import a.b.c` where c is a name: a.b
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)
    return out


def _cycles(module_level_only: bool) -> set[frozenset[str]]:
    """Strongly connected components (size > 1) of the accel_sim import graph (Tarjan).

    A package's own ``__init__`` running first is not counted as an edge: only the modules an
    import statement names."""
    modules = _modules()
    graph = {m: _imports(m, p, modules, module_level_only) for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _show(cycles) -> str:
    return "; ".join(" <-> ".join(sorted(c)) for c in sorted(cycles, key=sorted))


def test_the_import_graph_sees_the_package():
    modules = _modules()
    assert "accel_sim.dataflow.registry" in modules and "accel_sim.cli" in modules
    registry = _imports("accel_sim.dataflow.registry", modules["accel_sim.dataflow.registry"],
                        modules, module_level_only=False)  # fmt: skip
    assert "accel_sim.dataflow.base" in registry


def test_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    """The detector itself: two modules importing each other inside functions are a cycle."""
    pkg = tmp_path / "accel_sim"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from accel_sim import b\n")
    (pkg / "b.py").write_text("from . import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from accel_sim import a\n")  # fmt: skip
    (pkg / "d.py").write_text("from accel_sim.c import x\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert _cycles(module_level_only=False) == {frozenset({"accel_sim.a", "accel_sim.b"})}
    assert _cycles(module_level_only=True) == set()


def test_no_module_level_import_cycles():
    cycles = _cycles(module_level_only=True)
    assert not cycles, f"import cycles: {_show(cycles)}"


def test_no_import_cycles_through_function_level_imports():
    cycles = _cycles(module_level_only=False)
    new = {c for c in cycles if c not in KNOWN_FUNCTION_LEVEL_CYCLES}
    assert not new, f"import cycles (imports inside functions included): {_show(new)}"


def test_plan_modules_do_not_import_the_dataflow_registry():
    from accel_sim.dataflow.registry import DATAFLOWS

    modules = _modules()
    for name in {flow.build.__module__ for flow in DATAFLOWS.values()}:
        assert "accel_sim.dataflow.registry" not in _imports(
            name, modules[name], modules, module_level_only=False
        ), name


# --------------------------------------------------------------------------- version
def test_version_comes_from_the_package_metadata():
    assert accel_sim.__version__ == importlib.metadata.version("accel-sim")
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg", encoding="utf-8")
    if cfg.has_option("metadata", "version"):  # a source tree: the installed one is this one
        assert accel_sim.__version__ == cfg["metadata"]["version"]


# --------------------------------------------------------------------------- shipped data
@pytest.mark.parametrize("kind", sorted(resources.KINDS))
def test_every_shipped_name_resolves(kind, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the repository: shipped names only
    names = resources.list_names(kind)
    assert names, f"no shipped {kind}"
    folder = resources.data_dir(kind).resolve()
    for name in names:
        path = resources.resolve(kind, name)
        assert path.resolve().parent == folder, (kind, name, path)
        assert path.is_file() if resources.KINDS[kind].suffix else path.is_dir()
        # and by the relative path the README uses, from any directory
        assert resources.resolve(kind, path.relative_to(resources.data_root())) == path
        assert resources.resolve(kind, path) == path  # an absolute path as given


def test_shipped_names_load():
    from accel_sim.arch.load import list_archs, load_arch
    from accel_sim.workload.models import list_models, load_model
    from accel_sim.workload.trace import load_trace

    assert list_archs() == resources.list_names("arch")
    assert list_models() == resources.list_names("model")
    for name in list_archs():
        assert load_arch(name).name
    for name in list_models():
        assert load_model(name)
    for name in resources.list_names("trace"):
        assert load_trace(name).gemms


def test_shipped_paths_resolve_from_another_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = resources.data_root()
    assert resources.resolve("arch", "arch_configs/ascend_like_cube.yaml") == (
        root / "arch_configs" / "ascend_like_cube.yaml"
    )
    assert resources.resolve("trace", "traces/smollm2-135m") == root / "traces" / "smollm2-135m"
    assert resources.resolve("sweep", "workloads/sweeps/example.yaml").is_file()
    assert resources.resolve("model", "QWEN3-8B").name == "qwen3-8b.yaml"
    # a file of the user's wins over a shipped name
    mine = tmp_path / "arch_configs" / "ascend_like_cube.yaml"
    mine.parent.mkdir()
    mine.write_text("name: mine\n")
    assert resources.resolve("arch", "arch_configs/ascend_like_cube.yaml") == Path(
        "arch_configs/ascend_like_cube.yaml"
    )


@pytest.mark.parametrize(
    ("kind", "given", "message"),
    [
        ("arch", "no_such_arch", "no such architecture file or shipped name; shipped: ascend"),
        ("arch", "missing/arch.yaml", "architecture file not found"),
        ("arch", "missing.yaml", "architecture file not found"),
        ("model", "no-such-model", "unknown model; known models: "),
        ("sweep", "no-such-sweep", "no such sweep file or shipped name; shipped: "),
        ("trace", "no-such-trace", "no such trace directory; shipped traces: "),
        ("trace", "traces/no-such-trace", "trace directory not found"),
        ("arch", "arch_configs/../arch_configs/nope.yaml", "architecture file not found"),
    ],
)
def test_unresolvable_names_are_one_line_errors(kind, given, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserInputError) as err:
        resources.resolve(kind, given)
    text = str(err.value)
    assert text.startswith(f"{given}: ") and message in text and "\n" not in text


def test_a_trace_name_is_not_a_file_of_another_kind(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2-135m").write_text("not a directory")
    assert resources.resolve("trace", "smollm2-135m") == resources.data_dir("trace") / (
        "smollm2-135m"
    )


def _setup_data_packages() -> dict[str, str]:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DATA_PACKAGES":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no DATA_PACKAGES")


@pytest.mark.skipif(not (ROOT / "setup.py").is_file(), reason="needs the source tree")
def test_the_wheel_data_lists_cover_every_shipped_file():
    """setup.py maps each data folder into accel_sim/_data/; setup.cfg's package_data patterns
    must match every file the code reads from there (a new file type would be left out of the
    wheel silently otherwise)."""
    packages = _setup_data_packages()
    assert sorted(packages.values()) == sorted(k.folder for k in resources.KINDS.values())
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg", encoding="utf-8")
    package_data = cfg["options.package_data"]
    for package, folder in packages.items():
        assert package == "accel_sim._data." + folder.replace("/", ".")
        patterns = [p.strip() for p in package_data[package].replace("\n", ",").split(",")]
        patterns = [p for p in patterns if p]
        shipped = [
            p.relative_to(ROOT / folder).as_posix()
            for p in (ROOT / folder).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        ]
        assert shipped, folder
        left_out = [f for f in shipped if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
        assert not left_out, f"{folder}: not in setup.cfg package_data: {left_out}"
