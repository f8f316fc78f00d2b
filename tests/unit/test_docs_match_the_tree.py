"""README's Layout table and docs/architecture.md name only files and folders that exist, and
the Layout table lists every top-level package: a move or a new package that the docs miss
fails here, not in a newcomer's first ten minutes."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TICKED = re.compile(r"`([^`\s]+)`")
PATHLIKE = re.compile(r"^[\w.-]+(/[\w.-]*)*$")


def _layout_rows() -> dict[str, str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            for folder in TICKED.findall(cells[0]):
                rows[folder] = cells[1]
    return rows


def _files_named(text: str) -> list[str]:
    return [
        token
        for token in TICKED.findall(text)
        if PATHLIKE.match(token) and (token.endswith((".py", ".md", ".sh", "/")) or "/" in token)
    ]


def test_every_file_in_the_layout_table_exists_in_its_folder():
    missing = [
        f"{folder}{name}"
        for folder, text in _layout_rows().items()
        for name in _files_named(text)
        if not (REPO / folder / name).exists() and not (REPO / name).exists()
    ]
    assert not missing, f"README's Layout names what is not there: {missing}"


def test_the_layout_table_lists_every_top_level_package():
    listed = set(_layout_rows())
    packages = {
        f"{path.name}/"
        for path in REPO.iterdir()
        if path.is_dir() and (path / "__init__.py").exists() and path.name != "tests"
    }
    assert packages - listed == set(), f"packages missing from README's Layout: {packages - listed}"


def test_every_module_docs_architecture_names_exists():
    text = (REPO / "docs" / "architecture.md").read_text()
    named = [token for token in _files_named(text) if "/" in token and not token.startswith("/")]
    missing = [token for token in named if not (REPO / token).exists()]
    assert len(named) > 50  # the page names the modules it explains
    assert not missing, f"docs/architecture.md names what is not there: {missing}"
