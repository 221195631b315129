"""The package's shape: no import circles between modules, one top-level package, and
packages reached only through their faces."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles() -> None:
    graph = grimp.build_graph("solver")
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert _cycles(graph) == [["a.x", "a.y"]]


def test_one_top_level_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["tool"]["setuptools"]["packages"]["find"]["include"] == ["solver*"]
    assert not any((ROOT / name / "__init__.py").exists() for name in ("roles", "serve", "prompts"))


# `loop` has no face on purpose: importing the pure `state` and `policy` must not load the
# engine and its transport, which an `__init__` re-exporting the engine would do; callers
# import `solver.loop.state`, `solver.loop.engine`, ... by name. `cli` is the top (only
# `solver.__main__` enters it) and `_util` holds the leaves every package shares.
NO_FACE = frozenset({"solver.loop", "solver.cli", "solver._util"})
_FROM_FACE = re.compile(r"from (\S+) import ")


def _package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _private_owner(module: str) -> str | None:
    """The package a private module (``solver.X._y``, ``solver.X.y._z``) belongs to."""
    parts = module.split(".")
    for depth in range(len(parts) - 1, 1, -1):
        if parts[depth].startswith("_"):
            return ".".join(parts[:depth])
    return None


def _inside(importer: str, package: str) -> bool:
    return importer == package or importer.startswith(package + ".")


def face_violations(graph: grimp.ImportGraph) -> list[str]:
    """Imports that reach past a package's face: a private module from outside its package,
    or any module below a faced package from outside it except ``from solver.X import
    name`` with ``name`` in the face's ``__all__`` (a module the face hands out)."""
    found: list[str] = []
    for imported in sorted(graph.modules):
        if imported.count(".") < 2:
            continue
        package = _package_of(imported)
        owner = _private_owner(imported)
        faced = package not in NO_FACE
        for importer in sorted(graph.find_modules_that_directly_import(imported)):
            if owner is not None and not _inside(importer, owner):
                found.append(f"{importer} -> {imported} (private to {owner})")
                continue
            if not faced or _inside(importer, package):
                continue
            for detail in graph.get_import_details(importer=importer, imported=imported):
                line = str(detail["line_contents"])
                match = _FROM_FACE.match(line)
                face = getattr(importlib.import_module(package), "__all__", ())
                if match and match.group(1) == package and imported.split(".")[2] in face:
                    continue
                found.append(f"{importer} -> {imported} (not through {package}): {line}")
    return found


def test_packages_are_reached_through_their_faces() -> None:
    assert face_violations(grimp.build_graph("solver")) == []


def test_every_faced_package_has_a_face() -> None:
    packages = {_package_of(m) for m in grimp.build_graph("solver").modules if m.count(".") >= 2}
    for package in sorted(packages - NO_FACE):
        assert importlib.import_module(package).__all__, package


def test_the_face_check_finds_a_private_and_a_bypass() -> None:
    graph = grimp.ImportGraph()
    for name in ("solver", "solver.wire", "solver.wire.codec", "solver.store", "solver.store._fs"):
        graph.add_module(name)
    graph.add_module("solver.records")
    graph.add_import(
        importer="solver.records",
        imported="solver.store._fs",
        line_number=1,
        line_contents="from solver.store._fs import canonical_json",
    )
    graph.add_import(
        importer="solver.records",
        imported="solver.wire.codec",
        line_number=2,
        line_contents="from solver.wire.codec import encode_request",
    )
    graph.add_import(
        importer="solver.store",
        imported="solver.store._fs",
        line_number=1,
        line_contents="from solver.store._fs import canonical_json",
    )
    assert face_violations(graph) == [
        "solver.records -> solver.store._fs (private to solver.store)",
        "solver.records -> solver.wire.codec (not through solver.wire): "
        "from solver.wire.codec import encode_request",
    ]
