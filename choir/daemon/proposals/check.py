"""Proposals checked before they are offered (issue 17): a skill must load as the agent would
load it, with the tools of the agent's repos (global and its own) and the skill control tools.

A tool's manifest must load as the agent's tool loader would load it, once choird has set where
its executable goes (`tool`). A config change must load as `config load` would load config.json
with it (`config_patch`); a repo change's branch is fetched from the workspace and bound to its
diff (`repo_change`). All four are bound to a content hash; other kinds are stored as sent.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from choir.config import ChoirConfig
from choir.core.skills.runner import CONTROL_TOOLS
from choir.daemon.images import repos
from choir.daemon.proposals.config_patch import patched_config
from choir.daemon.proposals.git_apply import ApplyError, repo_url
from choir.daemon.proposals.repo_change import REPO_CHANGE, fetch_proposal, slug_of
from choir.daemon.proposals.skill import skill_file
from choir.daemon.proposals.tool import proposed_tool
from choir.daemon.sessions.state import SessionContext
from choir.daemon.staging.stage import ConfigStage
from choir.errors import ChoirError, UsageError
from choir.home import ChoirHome
from choir.protocol.tooling.manifest import ToolManifest


def known_tools(home: ChoirHome, config: ChoirConfig, agent_id: str) -> Collection[str]:
    """Every tool the agent's repos define (as of their last fetch), plus the skill tools."""
    names = set(CONTROL_TOOLS)
    wanted = [(repos.GLOBAL, config.global_repo)]
    if agent_id in config.agents:
        wanted.append((repos.repo_key(agent_id), config.agents[agent_id].repo))
    for key, repo in wanted:
        try:
            tree = repos.checkout(home, key, repo, fetch=False).path
        except ChoirError:
            continue  # no usable repo: its tools are unknown, and the build will say why
        names.update(_tool_names(tree / "tools"))
    return names


def _tool_names(tools: Path) -> set[str]:
    names = set()
    for path in sorted(tools.glob("*.json")) if tools.is_dir() else []:
        try:
            names.add(ToolManifest.model_validate_json(path.read_bytes()).name)
        except (OSError, ValidationError):
            continue  # a broken manifest is the build's to report
    return names


def proposal_check(
    stage: ConfigStage,
) -> Callable[[str, str, dict[str, Any], SessionContext], str | None]:
    """The `ApprovalService.check` of a choird running `stage`'s config."""

    def check(
        agent_id: str, request_type: str, payload: dict[str, Any], session: SessionContext
    ) -> str | None:
        running = stage.running
        if request_type == REPO_CHANGE:
            return _repo_change(running.config, agent_id, payload, session)
        if request_type == "config_change":
            text = _config_text(running.loaded.home)
            return patched_config(text, payload, stage.secrets.names()).sha256
        if request_type == "tool":
            sha256 = proposed_tool(payload).manifest.sha256
            require_applicable_repo(running.config, agent_id)
            return sha256
        if request_type != "skill":
            return None
        tools = known_tools(running.loaded.home, running.config, agent_id)
        sha256 = skill_file(payload, tools).sha256
        require_applicable_repo(running.config, agent_id)
        return sha256

    return check


def require_applicable_repo(config: ChoirConfig, agent_id: str) -> None:
    """Refuse (`UsageError`, one line for the model) a proposal its apply could not write: the
    agent's repo is not configured, or is not the agent's alone."""
    try:
        repo_url(config, agent_id)
    except ApplyError as error:
        raise UsageError(f"this proposal could not be applied: {error.message}") from None


def _repo_change(
    config: ChoirConfig, agent_id: str, payload: dict[str, Any], session: SessionContext
) -> str:
    """Fetch the proposed branch from the session's workspace; the hash of its review."""
    workspace = config.workspaces.get(session.bindings.workspace)
    if workspace is None:
        raise UsageError("the session has no workspace to fetch the branch from")
    into = f"proposal/{session.session_id}/{slug_of(payload)}"
    _, review = fetch_proposal(config, agent_id, Path(workspace.path), payload, into)
    return review.sha256


def _config_text(home: ChoirHome) -> str:
    try:
        return home.config_file.read_text()
    except OSError as error:
        raise ChoirError(f"cannot read {home.config_file}: {error.strerror}") from None
