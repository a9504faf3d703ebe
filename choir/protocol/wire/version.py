"""Image version metadata (§15.1, `/choir/version.json`) and the manifest hashes it records.

choird compares these at INIT_HELLO to catch silent drift between the image and the repos it
was built from, so builder and agent must hash identically: both use the functions here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from choir.protocol.base import WireModel
from choir.protocol.log.chain import canonical_json
from choir.protocol.scalars import Sha256Hex
from choir.protocol.tooling.manifest import ToolManifest
from choir.protocol.tooling.skills import SkillSpec


class VersionInfo(WireModel):
    agent_id: str
    """The agent the image was built for."""
    image_version: str
    """The image tag's git short hash."""
    global_repo_commit: str
    """Commit of the global repo baked in."""
    agent_repo_commit: str
    """Commit of the per-agent repo baked in."""
    tool_manifest_hash: Sha256Hex
    """`tool_manifest_hash` of the merged tools."""
    skill_manifest_hash: Sha256Hex
    """`skill_manifest_hash` of the merged skills."""


def tool_manifest_hash(manifests: Iterable[ToolManifest]) -> str:
    """SHA-256 of the canonical JSON of `{name: manifest}` over the merged tool set."""
    documents = {manifest.name: manifest.model_dump(mode="json") for manifest in manifests}
    return hashlib.sha256(canonical_json(documents)).hexdigest()


def skill_manifest_hash(skills: Iterable[SkillSpec]) -> str:
    """SHA-256 of the canonical JSON of `{name: spec}` over the merged skill set."""
    documents = {skill.name: skill.model_dump(mode="json") for skill in skills}
    return hashlib.sha256(canonical_json(documents)).hexdigest()
