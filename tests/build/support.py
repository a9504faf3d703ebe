"""Real git repositories and choir homes for the build tests."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from choir.config import init_home
from choir.config.scaffolding.gitrepo import git, init_with_commit
from choir.home import ChoirHome

TOOL_TEMPLATE: dict[str, Any] = {
    "llm": {
        "name": "",
        "description": "A test tool that exists to be merged, overridden and baked into images.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
    "runtime": {"implementation": "host", "side_effect": "read"},
}


def tool(name: str, description: str | None = None, **runtime: Any) -> str:
    """A valid tool manifest named `name`, as JSON text."""
    document = json.loads(json.dumps(TOOL_TEMPLATE))
    document["llm"]["name"] = name
    if description:
        document["llm"]["description"] = description
    document["runtime"].update(runtime)
    return json.dumps(document, indent=2)


def skill(name: str, description: str = "A test skill.") -> str:
    """A valid one-state skill using no tool."""
    return json.dumps(
        {
            "name": name,
            "description": description,
            "initial_state": "work",
            "states": {
                "work": {
                    "objective": "Do the work.",
                    "allowed_tools": [],
                    "transitions": [{"on": "complete", "to": "done"}],
                },
                "done": {"terminal": True},
            },
        },
        indent=2,
    )


def write_files(root: Path, files: dict[str, str | None]) -> None:
    """Write (or, for None, delete) files under `root`."""
    for relative, content in files.items():
        target = root / relative
        if content is None:
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)


def make_repo(path: Path, files: dict[str, str | None], message: str = "initial") -> str:
    """A new repository at `path` holding `files`; its commit."""
    path.mkdir(parents=True, exist_ok=True)
    write_files(path, files)
    return init_with_commit(path, message)


def commit(path: Path, files: dict[str, str | None], message: str = "change") -> str:
    """Change `files` in the repository at `path` and commit; the new commit."""
    write_files(path, files)
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", message)
    return git(path, "rev-parse", "HEAD").strip()


def bare_remote(source: Path, remote: Path) -> str:
    """A bare clone of `source` at `remote`, to serve as a `file://` remote; its URL."""
    git(source.parent, "clone", "--quiet", "--bare", str(source), str(remote))
    return f"file://{remote}"


def push(work: Path, remote_url: str) -> None:
    git(work, "push", "--quiet", "--force", remote_url, "HEAD:refs/heads/main")


def make_home(root: Path, *, agent_id: str | None = None) -> tuple[ChoirHome, str]:
    """`choirctl init` in `root/home`, its agent renamed to a test-unique id; (home, agent id).

    Image names derive from agent ids, so unique ids keep tests (and the operator's own
    `agent-1`) from touching each other's images.
    """
    home = ChoirHome(root / "home")
    init_home(home)
    agent_id = agent_id or f"bt-{uuid.uuid4().hex[:8]}"
    data = read_config(home)
    data["agents"][agent_id] = data["agents"].pop("agent-1")
    write_config(home, data)
    return home, agent_id


def read_config(home: ChoirHome) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(home.config_file.read_text())
    return data


def write_config(home: ChoirHome, data: dict[str, Any]) -> None:
    home.config_file.write_text(json.dumps(data, indent=2) + "\n")


def set_repo(home: ChoirHome, agent_id: str | None, url: str, ref: str = "main") -> None:
    """Point the global repo (agent_id None) or an agent's repo at `url`."""
    data = read_config(home)
    target = data["global_repo"] if agent_id is None else data["agents"][agent_id]["repo"]
    target.update(url=url, ref=ref)
    write_config(home, data)


def agent_repo(home: ChoirHome, agent_id: str) -> Path:
    return Path(read_config(home)["agents"][agent_id]["repo"]["url"])


def global_repo(home: ChoirHome) -> Path:
    return Path(read_config(home)["global_repo"]["url"])


def move_away(path: Path) -> Path:
    """Make a remote unreachable by renaming it; the new place (to move it back)."""
    hidden = path.with_name(path.name + ".away")
    shutil.move(path, hidden)
    return hidden
