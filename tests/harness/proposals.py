"""Proposals an agent's scripted model makes (a skill, `TRIAGE`/`SKILL`; a tool,
`choir.propose.tool`), for approval tests; the human side of registering a tool (`implement`);
and what the apply tests read of a repo and the approvals."""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path
from typing import Any

from choir.config.scaffolding.gitrepo import git
from choir.protocol import RequestApprovalRequest
from choir.store.postgres.pool import Pool

TOOL_PROPOSAL: dict[str, Any] = {
    "manifest": {
        "llm": {
            "name": "weather.lookup",
            "description": "Look up today's weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        "runtime": {"implementation": "external", "timeout_ms": 5000, "side_effect": "none"},
    },
    "intended_behavior": "Fetch the forecast for `city` and return temperature and sky.",
    "rationale": "Operators keep asking about the weather.",
}


SHOUT = "text.shout"
SHOUT_PROPOSAL: dict[str, Any] = {
    "manifest": {
        "llm": {
            "name": SHOUT,
            "description": "Upper-case a text.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
        "runtime": {"timeout_ms": 5000, "side_effect": "none", "idempotent": True},
    },
    "intended_behavior": "Return `text` in capitals as the summary.",
    "rationale": "People want to shout.",
}
"""What tool-builder proposes in the tests: a tool simple enough to write in sh."""
SHOUT_IMPLEMENTATION = """#!/bin/sh
# text.shout, as its operator wrote it: the `text` argument in capitals.
text=$(sed -n 's/.*"text": *"\\([^"]*\\)".*/\\1/p' | tr 'a-z' 'A-Z')
printf '{"status": "ok", "summary": "%s"}\\n' "$text"
"""


def implement(
    repo: Path,
    branch: str,
    scratch: Path,
    *,
    name: str = SHOUT,
    content: str = SHOUT_IMPLEMENTATION,
    executable: bool = True,
) -> str:
    """Write tool `name` on `branch` as a human would (plain git in a worktree of the agent's
    repo); the commit."""
    work = scratch / f"implement-{secrets.token_hex(3)}"
    _git(repo, "worktree", "add", "-q", str(work), branch)
    path = work / "tools" / name
    path.write_text(content)
    path.chmod(0o755 if executable else 0o644)
    _git(work, "add", f"tools/{name}")
    _git(work, "commit", "-q", "-m", f"{name}: implemented")
    commit = _git(work, "rev-parse", "HEAD")
    _git(repo, "worktree", "remove", str(work))
    return commit


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Operator", "-c", "user.email=op@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    return done.stdout.strip()


TRIAGE: dict[str, Any] = {
    "name": "triage",
    "description": "Sort incoming notes by urgency.",
    "initial_state": "sort",
    "states": {
        "sort": {
            "objective": "Read the notes and sort them.",
            "allowed_tools": ["choir.fs.read"],
            "transitions": [{"on": "complete", "to": "done"}],
        },
        "done": {"terminal": True},
    },
    "max_steps": 5,
}
SKILL = RequestApprovalRequest(
    request_type="skill", payload={"spec": TRIAGE, "rationale": "notes pile up"}
)
"""The skill proposal the apply tests approve."""


async def count_approvals(pool: Pool) -> int:
    async with pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM choir_control.pending_approvals"))


def head(bare: Path, ref: str = "main") -> str:
    return git(bare, "rev-parse", ref).strip()


def push_elsewhere(bare: Path, work: Path, name: str) -> str:
    """Someone else's commit pushed to the remote's main; the commit."""
    if not work.exists():
        git(bare.parent, "clone", "-q", f"file://{bare}", str(work))
    git(work, "pull", "-q", "--ff-only")
    (work / f"{name}.md").write_text(f"{name}\n")
    git(work, "add", "--all")
    git(work, "commit", "-q", "--no-verify", "--no-gpg-sign", "-m", name)
    git(work, "push", "-q", "origin", "HEAD:main")
    return head(work, "HEAD")
