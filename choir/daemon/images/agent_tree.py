"""An agent's `/choir` tree (§15.1), merged from the global and per-agent repos (§6.5).

Both runtimes use the same tree: the process runtime runs choir-agent on it directly, the docker
build bakes it into the image. Merge rules (§6.5, §17.3 step 5): tools side by side under
`tools/global` and `tools/agent` (the registry lets an agent tool override a global one of the
same name), skills merged by file name with the agent's winning, `USER.md` from the global repo
only, `SOUL.md` and `SOUL-CORE.md` from the agent repo when it has them, else from global.
`version.json` records both commits and both manifest hashes, which INIT_HELLO holds the agent to.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from choir.config.scaffolding.gitrepo import git, is_repo
from choir.core.skills.registry import load_skills
from choir.core.skills.runner import CONTROL_TOOLS
from choir.errors import ChoirError, ConfigError
from choir.protocol import VersionInfo, skill_manifest_hash, tool_manifest_hash
from choir.protocol.problems import validation_problems
from choir.protocol.tooling.manifest import ToolManifest

IDENTITY_FROM_AGENT: Final = ("SOUL.md", "SOUL-CORE.md")
"""Identity files the per-agent repo may override (§6.5); USER.md comes from global only."""
TOOL_ORIGINS: Final = ("global", "agent")
"""`tools/<origin>/` directories of the tree, global first so an agent tool overrides."""
IGNORED: Final = (".git", "__pycache__", "*.pyc")
"""Never copied from a repo into the tree."""


def materialize(
    global_repo: Path,
    agent_repo: Path,
    tree: Path,
    *,
    agent_id: str,
    image_version: str,
    commits: tuple[str, str],
) -> VersionInfo:
    """Merge the repos into `tree` (which must not exist), check it and write version.json.

    `commits` are the (global, agent) commits the trees were read at. Raises `ConfigError`
    listing every problem of the merged tools and skills.
    """
    merge_tree(global_repo, agent_repo, tree)
    files = _tool_files(tree)
    problems = _external_tool_problems(files, tree, {"global": global_repo, "agent": agent_repo})
    if problems:
        raise ConfigError(problems, header="the agent's tools are invalid: fix them in its repos")
    version = VersionInfo(
        agent_id=agent_id,
        image_version=image_version,
        global_repo_commit=commits[0],
        agent_repo_commit=commits[1],
        **_hashes(tree, files),
    )
    (tree / "version.json").write_text(version.model_dump_json(indent=2) + "\n")
    return version


def merge_tree(global_repo: Path, agent_repo: Path, tree: Path) -> None:
    """§6.5's merge into §15.1's layout (see the module docstring)."""
    _copy_dir(global_repo / "tools", tree / "tools" / "global")
    _copy_dir(agent_repo / "tools", tree / "tools" / "agent")
    (tree / "skills").mkdir(parents=True)
    for source in (global_repo / "skills", agent_repo / "skills"):
        for skill in sorted(source.glob("*.json")) if source.is_dir() else []:
            shutil.copyfile(skill, tree / "skills" / skill.name)
    _copy_file(global_repo / "identity" / "USER.md", tree / "USER.md")
    for name in IDENTITY_FROM_AGENT:
        agent_copy = agent_repo / "identity" / name
        _copy_file(
            agent_copy if agent_copy.is_file() else global_repo / "identity" / name, tree / name
        )


def manifest_hashes(tree: Path) -> dict[str, str]:
    """version.json's `tool_manifest_hash` and `skill_manifest_hash` of the merged tree."""
    return _hashes(tree, _tool_files(tree))


@dataclass(frozen=True)
class _ToolFile:
    origin: str
    path: Path
    manifest: ToolManifest


def _tool_files(tree: Path) -> list[_ToolFile]:
    """Every tool manifest of the tree, global first; `ConfigError` listing every problem."""
    problems: list[str] = []
    files: list[_ToolFile] = []
    for origin in TOOL_ORIGINS:
        for path in sorted((tree / "tools" / origin).glob("*.json")):
            try:
                manifest = ToolManifest.model_validate_json(path.read_bytes())
            except ValidationError as error:
                problems.extend(
                    f"tools/{origin}/{path.name}: {p}" for p in validation_problems(error)
                )
                continue
            files.append(_ToolFile(origin, path, manifest))
    if problems:
        raise ConfigError(problems, header="the agent's tools are invalid: fix them in its repos")
    return files


def _hashes(tree: Path, files: list[_ToolFile]) -> dict[str, str]:
    tools = {file.manifest.name: file.manifest for file in files}  # agent over global
    skills = load_skills(tree / "skills", known_tools=[*tools, *CONTROL_TOOLS])
    return {
        "tool_manifest_hash": tool_manifest_hash(tools.values()),
        "skill_manifest_hash": skill_manifest_hash(skills.values()),
    }


def _external_tool_problems(
    files: list[_ToolFile], tree: Path, repos: dict[str, Path]
) -> list[str]:
    """External tools whose executable under /choir/tools is neither in the tree nor built
    from a source directory `tools/<name>/` of their repo (§17.6 "source directories exist")."""
    problems = []
    for file in files:
        exec_path = file.manifest.runtime.exec_path or ""
        if not exec_path.startswith("/choir/tools/"):
            continue
        baked = tree / exec_path.removeprefix("/choir/")
        source = repos[file.origin] / "tools" / file.manifest.name
        if not baked.exists() and not source.is_dir():
            problems.append(
                f"tools/{file.origin}/{file.path.name}: runtime.exec_path {exec_path} is not in "
                f"the repo: commit the executable, or its source directory "
                f"tools/{file.manifest.name}/ for the Dockerfile to build"
            )
    return problems


def commit_of(repo: Path) -> str:
    """HEAD of the repo's working tree, marked `+dirty` when it has uncommitted changes."""
    if not is_repo(repo):
        return "none"
    # One git for both (an agent's start reads two repos before it spawns it): the header
    # `# branch.oid` is HEAD, every other line an uncommitted change.
    lines = git(repo, "status", "--porcelain=v2", "--branch", "--no-ahead-behind").splitlines()
    head = next((line.split()[2] for line in lines if line.startswith("# branch.oid ")), "")
    if not head or head == "(initial)":
        raise ChoirError(f"{repo} has no commit yet: commit its files (git commit) and retry")
    dirty = any(not line.startswith("#") for line in lines)
    return f"{head}+dirty" if dirty else head


def _copy_dir(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(*IGNORED))
    else:
        target.mkdir(parents=True)


def _copy_file(source: Path, target: Path) -> None:
    if source.is_file():
        shutil.copyfile(source, target)
