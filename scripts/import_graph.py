"""Print the imports between our top-level packages: importing → imported, with counts.

Reads the packages from pyproject's [tool.importlinter] and builds the graph with grimp (the
library lint-imports uses), so imports inside functions count too. A count is of import
statements (lines); "N modules" is how many distinct module pairs they join. Pairs that import
each other are marked as a cycle. tests/ and bench/ are left out unless --all is given.

    .venv/bin/python scripts/import_graph.py [--all]
"""

import sys
import tomllib
from collections import Counter
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
CONSUMERS_ONLY = {"tests", "bench"}  # they import everything and nothing imports them


def package_edges(packages: list[str]) -> tuple[Counter, Counter]:
    graph = grimp.build_graph(*packages, cache_dir=None)
    lines: Counter = Counter()
    module_pairs: Counter = Counter()
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            source, target = importer.split(".")[0], imported.split(".")[0]
            if source == target:
                continue
            details = graph.get_import_details(importer=importer, imported=imported)
            lines[source, target] += max(len(details), 1)
            module_pairs[source, target] += 1
    return lines, module_pairs


def main() -> None:
    sys.path.insert(0, str(ROOT))
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    packages = list(config["root_packages"])
    lines, module_pairs = package_edges(packages)
    shown = set(packages) if "--all" in sys.argv else set(packages) - CONSUMERS_ONLY
    edges = sorted(
        (pair for pair in lines if pair[0] in shown and pair[1] in shown),
        key=lambda pair: (pair[0], -lines[pair], pair[1]),
    )
    for source, target in edges:
        cycle = "  <-> cycle" if (target, source) in lines else ""
        print(
            f"{source:>15} -> {target:<15} {lines[source, target]:>3} imports"
            f" ({module_pairs[source, target]} module pairs){cycle}"
        )
    cycles = {frozenset(pair) for pair in edges if (pair[1], pair[0]) in lines}
    total = sum(lines[pair] for pair in edges)
    print(f"{len(edges)} package edges, {total} imports, {len(cycles)} two-way pairs")


if __name__ == "__main__":
    main()
