"""The README's map of the tree names every top-level folder, and says what kind it is."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_readme_maps_every_top_level_folder() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    folders = {path.split("/")[0] for path in tracked if "/" in path}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_cells = [line.split("|")[1] for line in readme.splitlines() if line.startswith("| `")]
    mapped = {name for cell in first_cells for name in re.findall(r"`([^`/]+)/", cell)}
    assert sorted(folders - mapped) == []
