"""A proposed config change checked as `config load` would check it, and what binds its review.

Pure: the caller reads config.json and the secret names. The proposal is a JSON merge patch
(RFC 7386) on config.json; it is offered only if config.json with the patch applied validates
(every problem named, for the model to fix). The approval is bound to the SHA-256 of the patch
together with the values it replaces: what the approver reviewed is the diff of exactly those
lines, so an edit of config.json where the patch applies, made after the proposal, makes the
apply refuse (the hash differs) instead of overwriting it unseen.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from choir.config import ChoirConfig
from choir.config.validation.validate import validate_config_data
from choir.core.proposal_diff import json_text, merge_patch
from choir.errors import UsageError

ABSENT: Final = {"$absent": True}
"""What `replaced` records for a key config.json does not have (JSON has no undefined)."""


@dataclass(frozen=True)
class PatchedConfig:
    """config.json with the patch applied and validated, and the hash the approval binds."""

    document: dict[str, Any]
    config: ChoirConfig
    sha256: str

    @property
    def text(self) -> str:
        return json_text(self.document)


def patch_of(payload: Mapping[str, Any]) -> dict[str, Any]:
    patch = payload.get("patch")
    if not isinstance(patch, dict) or not patch:
        raise UsageError(
            "the proposal has no `patch` object: send a JSON merge patch of config.json, "
            'e.g. {"approval_timeout_ms": 600000}'
        )
    return patch


def replaced(document: Any, patch: Mapping[str, Any]) -> dict[str, Any]:
    """The values of `document` that `patch` replaces or deletes, in the patch's shape."""
    before: dict[str, Any] = {}
    for key, value in patch.items():
        current = document.get(key, ABSENT) if isinstance(document, Mapping) else ABSENT
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            before[key] = replaced(current, value)
        else:
            before[key] = current
    return before


def review_hash(document: Mapping[str, Any], patch: Mapping[str, Any]) -> str:
    """SHA-256 of the patch and the values it replaces (canonical JSON)."""
    bound = {"patch": patch, "replaces": replaced(document, patch)}
    canonical = json.dumps(bound, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def patched_config(
    config_text: str, payload: Mapping[str, Any], secret_names: Collection[str]
) -> PatchedConfig:
    """config.json (`config_text`) with the proposal's patch applied, validated as `config
    load` validates it; `UsageError` naming every problem when it would not load."""
    patch = patch_of(payload)
    try:
        document = json.loads(config_text)
    except ValueError as error:
        raise UsageError(f"config.json does not parse ({error}): fix it first") from None
    if not isinstance(document, dict):
        raise UsageError("config.json is not a JSON object: fix it first")
    after = merge_patch(document, patch)
    if after == document:
        raise UsageError("the patch changes nothing in config.json: nothing to propose")
    report = validate_config_data(after, secret_names)
    if report.config is None:
        problems = "; ".join(report.errors)
        raise UsageError(f"config.json with this patch would not load: {problems}")
    return PatchedConfig(after, report.config, review_hash(document, patch))
