"""Print the pinned dependencies of pyproject.toml (runtime + dev), one per line."""

import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["dev"]))
