"""The import graph of ``src/hire``, from the code's own ``import`` statements (at the top of a file and inside
functions alike): its size between top-level modules and packages (a package counted as one node) and the import
cycles between files and between those top-level nodes.

    python scripts/import_graph.py            # a summary
    python scripts/import_graph.py --edges    # and every top-level edge

Exit status 1 where there is a cycle.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def file_graph() -> dict[str, set[str]]:
    """Each module of hire -> the modules of hire it imports (``from hire.x import y`` counts as hire.x.y where that
    is a module, else hire.x)."""
    modules = {module_name(p): p for p in (SRC / "hire").rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base
                                                                                                     else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target.startswith("hire"):
                    graph[name].add(target)
    return graph


def top(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else name


def top_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Between the top-level modules and packages of hire (``hire.model`` for all of hire.model.*); ``hire`` itself
    (its ``__init__``) left out."""
    out: dict[str, set[str]] = {}
    for source, targets in graph.items():
        if source == "hire":
            continue
        out.setdefault(top(source), set())
        for target in targets:
            if target != "hire" and top(target) != top(source):
                out[top(source)].add(top(target))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges", action="store_true", help="print every top-level edge")
    args = parser.parse_args()
    files = file_graph()
    tops = top_graph(files)
    file_cycles, top_cycles = cycles(files), cycles(tops)
    print(f"files: {len(files)} modules, {sum(map(len, files.values()))} imports, {len(file_cycles)} cycles")
    for c in file_cycles:
        print("  cycle:", " <-> ".join(c))
    print(f"top level: {len(tops)} nodes, {sum(map(len, tops.values()))} edges, {len(top_cycles)} cycles")
    for c in top_cycles:
        print("  cycle:", " <-> ".join(c))
    if args.edges:
        for source in sorted(tops):
            print(f"  {source} -> {', '.join(sorted(tops[source]))}")
    return 1 if file_cycles or top_cycles else 0


if __name__ == "__main__":
    sys.exit(main())
