"""A proposed skill checked at proposal time and turned into the one file an apply writes.

`choir.propose.skill` sends `{spec, rationale}`. The spec must load exactly as the agent's skill
loader would load `skills/<name>.json` (same checks, the agent's tools known), or the proposal is
refused with every problem, so the model can fix it. The file's bytes are canonical (keys sorted,
two-space indent): jsonb reorders keys, so the bytes hashed when the proposal is made are the
bytes rebuilt from the stored payload when it is applied — the hash binds the approval to them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Final

from choir.core.skills.registry import check_skill
from choir.errors import UsageError

SKILLS_DIR: Final = "skills"
_SAFE_PART: Final = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True)
class ProposedFile:
    """One file a proposal writes into a repo."""

    path: str
    """Relative to the repo root, `/`-separated, checked by `safe_repo_path`."""
    content: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()


def skill_file(payload: Mapping[str, Any], known_tools: Collection[str]) -> ProposedFile:
    """The file a skill proposal writes; `UsageError` naming every problem of the spec."""
    spec_data = payload.get("spec")
    if not isinstance(spec_data, dict):
        raise UsageError("the proposal has no `spec` object: send the complete SkillSpec")
    stem = str(spec_data.get("name", ""))
    spec, problems = check_skill(spec_data, stem, known_tools)
    if spec is None or problems:
        raise UsageError(
            "the proposed skill would not load; fix it and propose again: " + "; ".join(problems)
        )
    text = json.dumps(spec.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False)
    return ProposedFile(safe_repo_path(f"{SKILLS_DIR}/{spec.name}.json"), (text + "\n").encode())


def safe_repo_path(path: str) -> str:
    """`path` when it stays inside a repo: relative, no `..`, no empty or hidden parts (`.git`
    included). Raises `UsageError` otherwise. Symlinks cannot be followed: the apply writes
    blobs into git's index, never through the file system."""
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or "\\" in path:
        raise UsageError(f"proposed path {path!r} is not a relative path inside the repo")
    for part in parts:
        if not _SAFE_PART.match(part) or part in (".", ".."):
            raise UsageError(f"proposed path {path!r} has the part {part!r}: not allowed")
    return "/".join(parts)


def slug_of(payload: Mapping[str, Any]) -> str:
    """The proposal branch's last part: the skill's name."""
    spec = payload.get("spec")
    name = spec.get("name") if isinstance(spec, dict) else None
    return safe_repo_path(str(name or "skill")).replace("/", "-")
