"""What a proposal would change, as a unified diff (`approval show`, the console's detail).

Pure: the caller reads the current texts. A skill or tool proposal is the JSON file it would
add or replace in the agent's repo (`skills/<name>.json`, `tools/<name>.json`, written as
indented JSON) against that file's current version, or against nothing when it is new. A config
change is its JSON merge patch (RFC 7386) applied to config.json, both sides indented alike, so
only the patched lines differ. Other kinds (a repo change's branch) have no diff here.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

Read = Callable[[str], str | None]
"""The current text of a file of the agent's repo (`skills/x.json`), None when it has none."""

DIRECTORIES: Final = {"skill": "skills", "tool": "tools"}


def proposed_file(request_type: str, payload: Mapping[str, Any]) -> tuple[str, str] | None:
    """The repo file a skill or tool proposal writes and its text; None for other kinds or a
    payload without a usable name."""
    directory = DIRECTORIES.get(request_type)
    document = payload.get("spec" if request_type == "skill" else "manifest")
    if directory is None or not isinstance(document, Mapping):
        return None
    name = document.get("name") if request_type == "skill" else _tool_name(document)
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        return None  # never a path outside the directory
    return f"{directory}/{name}.json", json_text(document)


def file_diff(path: str, current: str | None, proposed: str, *, side: str) -> str:
    """`proposed` against `current` (None: a new file) as a unified diff of `side:path`."""
    before = "/dev/null" if current is None else f"a/{side}:{path}"
    return _unified(current or "", proposed, before, f"b/{side}:{path}")


def config_diff(config_json: Mapping[str, Any], patch: Mapping[str, Any]) -> str:
    """config.json before and after the merge patch `patch`, as a unified diff."""
    after = merge_patch(config_json, patch)
    return _unified(json_text(config_json), json_text(after), "a/config.json", "b/config.json")


def proposal_diff(
    request_type: str,
    payload: Mapping[str, Any],
    read: Read,
    config_json: Mapping[str, Any],
    *,
    agent_id: str,
) -> str | None:
    """The diff of one proposal by `agent_id`; None for a kind (or payload) that has none."""
    if request_type == "config_change":
        patch = payload.get("patch")
        return config_diff(config_json, patch) if isinstance(patch, Mapping) else None
    proposed = proposed_file(request_type, payload)
    if proposed is None:
        return None
    path, text = proposed
    return file_diff(path, read(path), text, side=agent_id)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, `null` deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def json_text(document: Any) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _tool_name(manifest: Mapping[str, Any]) -> Any:
    llm = manifest.get("llm")
    return llm.get("name") if isinstance(llm, Mapping) else None


def _unified(before: str, after: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), old, new
    )
    return "".join(lines)
