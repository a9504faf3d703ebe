"""A proposed tool (§8.10, two-phase registration): the model proposes metadata, a human writes
the implementation.

Phase 1 (`proposed_tool`): `choir.propose.tool` sends `{manifest, intended_behavior,
rationale}`. Only an external tool can be proposed — its code is an executable a human commits
next to the manifest — so choird fixes where that executable is (`runtime.exec_path`
`/choir/tools/agent/<name>`, the repo's `tools/<name>`) and the manifest must then load as the
agent's tool loader loads it, or the proposal is refused with every problem. On approval the
manifest and a stub are committed on the proposal branch, never merged. The stub is not
executable (mode 100644) and carries `STUB_MARKER`: were it merged by hand, the agent's loader
would refuse it, so a model is never offered code no human has reviewed. The approval is bound
to the manifest's canonical bytes.

Phase 2 (`check_registration`): `choirctl tool register <agent> <branch>` accepts the branch only
if it changes nothing but this tool's files, its manifest still loads and names the executable,
and the executable is there, executable, not a symlink and no longer the stub. Pure over git's
object store (the branch is never checked out).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from choir.daemon.proposals.git_apply import TargetRepo, read_git
from choir.daemon.proposals.skill import ProposedFile, safe_repo_path
from choir.errors import NotFoundError, UsageError
from choir.protocol.problems import validation_problems
from choir.protocol.tooling.manifest import META_PREFIX, ToolManifest

TOOLS_DIR: Final = "tools"
EXEC_PREFIX: Final = "/choir/tools/agent/"
"""Where the image (and the process runtime's tree) has the agent repo's `tools/`."""
STUB_MARKER: Final = "choir: NOT READY"
"""In the stub until a human replaces it; `tool register` refuses a branch that still has it."""
EXECUTABLE: Final = "100755"


@dataclass(frozen=True)
class ProposedTool:
    name: str
    manifest: ProposedFile
    """`tools/<name>.json`: what the approver reviewed (its hash binds the approval)."""

    @property
    def executable_path(self) -> str:
        return f"{TOOLS_DIR}/{self.name}"

    def stub(self, agent_id: str, branch: str, intended: str) -> ProposedFile:
        """The not-ready implementation committed beside the manifest: what to write, where."""
        said = "\n".join(f"#   {line}" for line in intended.splitlines() or ["(not given)"])
        text = f"""#!/bin/sh
# {STUB_MARKER}: a stub choird committed for tool {self.name}. It never runs: it is not
# executable, and `choirctl tool register` refuses this file while this line is in it.
#
# A human writes the tool here (any language; the first line picks the interpreter):
#   1. replace this file with the implementation, on branch {branch}
#   2. make it executable: git update-index --chmod=+x {self.executable_path}
#   3. commit, then: choirctl tool register {agent_id} {branch}
# Contract: stdin is one JSON object {{"arguments": {{...}}, "secrets": {{...}}}}; stdout must be
# one JSON object {{"status": "ok" or "error", "summary": "...", "data": {{...}}}}.
# Its arguments follow the schema in {self.manifest.path}.
#
# What the agent said it must do (a model's words: review them, do not run them):
{said}
echo '{{"status": "error", "summary": "{self.name} is not implemented"}}'
exit 1
"""
        return ProposedFile(self.executable_path, text.encode())


def proposed_tool(payload: Mapping[str, Any]) -> ProposedTool:
    """The tool a proposal would add; `UsageError` naming every problem of its manifest."""
    data = payload.get("manifest")
    if not isinstance(data, dict):
        raise UsageError("the proposal has no `manifest` object: send the complete tool manifest")
    llm, runtime = data.get("llm"), data.get("runtime")
    if not isinstance(llm, dict) or not isinstance(runtime, dict):
        raise UsageError("the manifest needs an `llm` and a `runtime` object")
    name = str(llm.get("name", ""))
    if name.startswith(META_PREFIX) or runtime.get("meta"):
        raise UsageError(f"{META_PREFIX}* meta tools cannot be proposed: propose a runtime tool")
    implementation = runtime.get("implementation", "external")
    if implementation != "external":
        raise UsageError(
            f'runtime.implementation {implementation!r}: only an "external" tool can be '
            "proposed (a human writes its executable); propose it as external"
        )
    exec_path = f"{EXEC_PREFIX}{name}"
    if runtime.get("exec_path") not in (None, exec_path):
        raise UsageError(f"runtime.exec_path must be {exec_path} (or left out): choird sets it")
    fixed = {**data, "runtime": {**runtime, "implementation": "external", "exec_path": exec_path}}
    try:
        manifest = ToolManifest.model_validate(fixed)
    except ValidationError as error:
        problems = "; ".join(validation_problems(error))
        raise UsageError(f"the proposed manifest would not load; fix it: {problems}") from None
    text = json.dumps(
        manifest.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False
    )
    path = safe_repo_path(f"{TOOLS_DIR}/{manifest.name}.json")
    safe_repo_path(f"{TOOLS_DIR}/{manifest.name}")
    return ProposedTool(manifest.name, ProposedFile(path, (text + "\n").encode()))


def tool_name(payload: Mapping[str, Any]) -> str:
    """The proposed tool's name as stored (the branch's last part); `tool` if it has none."""
    manifest = payload.get("manifest")
    llm = manifest.get("llm") if isinstance(manifest, dict) else None
    name = llm.get("name") if isinstance(llm, dict) else None
    return safe_repo_path(str(name or "tool")).replace("/", "-")


def check_registration(repo: TargetRepo, branch: str, name: str) -> str:
    """The branch's tip when it registers tool `name` as `tool register` requires (see the
    module docstring); `NotFoundError` or `UsageError` saying what to fix otherwise."""
    code, tip = read_git(
        repo, "rev-parse", "--verify", "--quiet", f"{repo.branch_ref(branch)}^{{commit}}", ok=(0, 1)
    )
    if code:
        raise NotFoundError(f"no branch {branch} in {repo.where}: see `git branch` there")
    manifest_path, executable = f"{TOOLS_DIR}/{name}.json", f"{TOOLS_DIR}/{name}"
    base = read_git(repo, "merge-base", repo.branch_ref(repo.ref), tip)[1]
    changed = read_git(repo, "diff", "--name-only", "--no-renames", base, tip)[1].splitlines()
    own = (manifest_path, executable)
    stray = [p for p in changed if p not in own and not p.startswith(f"{executable}/")]
    if stray:
        raise UsageError(
            f"branch {branch} changes {', '.join(stray[:3])}: a tool registration commits only "
            f"{manifest_path} and {executable} (and {executable}/); move the rest to its own change"
        )
    manifest = _manifest_at(repo, tip, manifest_path, branch)
    if manifest.runtime.exec_path != f"{EXEC_PREFIX}{name}" or manifest.name != name:
        raise UsageError(
            f"{manifest_path} on {branch} must name tool {name} with runtime.exec_path "
            f"{EXEC_PREFIX}{name}"
        )
    mode = _mode_at(repo, tip, executable)
    if mode is None:
        raise UsageError(f"{executable} is missing on {branch}: commit the implementation there")
    if mode != EXECUTABLE:
        raise UsageError(
            f"{executable} on {branch} is not an executable file (mode {mode}): "
            f"git update-index --chmod=+x {executable}, commit, register again"
        )
    content = read_git(repo, "cat-file", "blob", f"{tip}:{executable}")[1]
    if STUB_MARKER in content:
        raise UsageError(
            f"{executable} on {branch} is still choird's stub ({STUB_MARKER!r} is in it): "
            "write the implementation, remove that line, commit, register again"
        )
    return tip


def _manifest_at(repo: TargetRepo, tip: str, path: str, branch: str) -> ToolManifest:
    code, text = read_git(repo, "cat-file", "blob", f"{tip}:{path}", ok=(0, 128))
    if code:
        raise UsageError(f"{path} is missing on {branch}: it is the proposal branch's manifest")
    try:
        return ToolManifest.model_validate_json(text)
    except ValidationError as error:
        problems = "; ".join(validation_problems(error))
        raise UsageError(f"{path} on {branch} does not load: {problems}") from None


def _mode_at(repo: TargetRepo, tip: str, path: str) -> str | None:
    listed = read_git(repo, "ls-tree", tip, "--", path)[1]
    if not listed:
        return None
    return listed.split(maxsplit=1)[0]  # `<mode> <type> <object>\t<path>`


def awaiting_text(agent_id: str, branch: str, tool: ProposedTool) -> str:
    """The phase-1 outcome, for the agent (honest: it cannot call the tool yet) and the operator
    (what a human writes, where, and the command that registers it)."""
    return (
        "awaiting implementation: approved, but a human writes the tool and registers it; until "
        f"then it cannot be called. {tool.manifest.path} and a not-ready stub "
        f"{tool.executable_path} are committed on branch {branch} (not merged): write the tool "
        f"in {tool.executable_path} there, make it executable, remove the '{STUB_MARKER}' line, "
        f"commit, then run: choirctl tool register {agent_id} {branch}"
    )


def register_failed_text(agent_id: str, branch: str, step: str, reason: str) -> str:
    """A failed register's outcome: what failed, that nothing changed, and that the approval
    still waits for the implementation — fix the branch and register again."""
    return (
        f"awaiting implementation: the last register failed at {step}: {reason}; it was undone "
        f"and the agent runs as it did. Fix the tool on branch {branch}, commit, then run again: "
        f"choirctl tool register {agent_id} {branch}"
    )
