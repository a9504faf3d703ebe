"""The package layout stays legible as it grows (issue 13.1): no crowded folder, no family of
modules named by a shared prefix where a package should be."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import choir

ROOT = Path(choir.__file__).parent
MAX_MODULES = 17
"""The issue's "about 15": a folder past it is split into packages named for what they hold."""
MAX_FAMILY = 2
"""Three modules named `<prefix>_…` beside each other are a package wearing a prefix."""


def _folders() -> list[Path]:
    return [d for d in [ROOT, *ROOT.rglob("*")] if d.is_dir() and d.name != "__pycache__"]


def _modules(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")


def test_no_folder_holds_more_than_about_fifteen_modules() -> None:
    crowded = {
        str(d.relative_to(ROOT.parent)): len(_modules(d))
        for d in _folders()
        if len(_modules(d)) > MAX_MODULES
    }
    assert crowded == {}, f"split these folders into packages: {crowded}"


def test_no_prefix_named_module_families() -> None:
    families = {}
    for folder in _folders():
        prefixes = Counter(m.split("_")[0] for m in _modules(folder) if "_" in m.strip("_"))
        for prefix, count in prefixes.items():
            if prefix and count > MAX_FAMILY:
                families[f"{folder.relative_to(ROOT.parent)}/{prefix}_*"] = count
    assert families == {}, f"make these module families packages: {families}"
