"""What `choirctl config diff` shows: each change between running and staged, and how it lands.

Pure. config.json is compared leaf by leaf on its validated JSON form (defaults filled in, so
spelling out a default is no change); a named entry that appears or disappears is one change.
Each change is tagged `hot-reload` (published by `choirctl config apply`, §16.1) or
`restart-required` with the command that makes it take effect (§16.2, §17.6).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from choir.config import ChoirConfig, SecretStore, Tunables
from choir.config.resources import EMBEDDING_HOT_FIELDS
from choir.config.validation.references import AGENT_DEFAULTS

Op = Literal["+", "-", "~"]
Scope = Literal["hot-reload", "restart-required"]

APPLY: Final = "choirctl config apply"
SECRET_APPLY: Final = "choirctl secret apply"
RESTART_CHOIRD: Final = "choir restart"
"""What puts a choird-level change into effect: choird restarted in place, agents kept running."""
FILES: Final = ("config.json", "secrets.json")

HOT_SECTIONS: Final = frozenset({"models", "tts", "voice_profiles", "search"}) | (
    frozenset(Tunables.model_fields) - {"rpc"}
)
"""Top-level keys whose changes running agents pick up via FETCH_DYNAMIC_CONFIG."""
CHOIRD_SECTIONS: Final = frozenset({"postgres", "gateways", "dms", "embedding", "rpc"})
"""Keys choird reads once at startup: its database, gateways, DM routing, memory, listeners."""
LEASED_SECTIONS: Final = {section: role for role, section in AGENT_DEFAULTS.items()}
"""Named sections an agent binds at start, and the default naming each."""


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One difference between the running and the staged configuration."""

    op: Op
    """`+` added, `-` removed, `~` changed."""
    source: str
    """Where it is: `config.json`, `secrets.json`, a repo file's side (`global`, an agent id:
    `global:tools/x.json`) or a repo's commits (`agent-1 repo`: `abc1234→def5678`)."""
    path: str
    """Dotted path inside the source, e.g. `models.sonnet.temperature`."""
    scope: Scope
    action: str
    """The command that makes it take effect."""

    @property
    def where(self) -> str:
        """`config.json: models.x`, `agent-1 repo: abc1234→def5678`, or a repo file's
        `global:tools/x.json` (§17.6's spellings)."""
        if self.source in FILES or self.source.endswith(" repo"):
            return f"{self.source}: {self.path}"
        return f"{self.source}:{self.path}"

    def render(self) -> str:
        """`~ config.json: models.sonnet.temperature [hot-reload] → included in: …` (§17.6)."""
        how = "included in" if self.action in (APPLY, SECRET_APPLY) else "use"
        return f"{self.op} {self.where} [{self.scope}] → {how}: {self.action}"


def render_changes(changes: list[ConfigChange]) -> list[str]:
    """Changes as aligned lines, in the layout of §17.6's example."""
    width = max((len(f"{c.op} {c.where}") for c in changes), default=0)
    lines = []
    for change in changes:
        head = f"{change.op} {change.where}".ljust(width)
        tag = f"[{change.scope}]".ljust(len("[restart-required]"))
        how = "included in" if change.action in (APPLY, SECRET_APPLY) else "use"
        lines.append(f"{head}  {tag} → {how}: {change.action}")
    return lines


def config_changes(running: ChoirConfig, staged: ChoirConfig) -> list[ConfigChange]:
    """Every change to config.json, classified."""
    before, after = running.model_dump(mode="json"), staged.model_dump(mode="json")
    return [
        ConfigChange(op, "config.json", ".".join(path), *_classify(op, path, staged))
        for op, path in _leaf_changes(before, after, ())
    ]


def choird_pending(started: ChoirConfig, applied: ChoirConfig) -> list[ConfigChange]:
    """The changes `applied` makes to what choird started with that only a choird restart
    puts into effect; the others run from the apply (hot) or wait for an agent's restart."""
    return [c for c in config_changes(started, applied) if c.action == RESTART_CHOIRD]


def as_running(started: ChoirConfig, applied: ChoirConfig) -> dict[str, Any]:
    """`applied` as JSON with each change that waits for a choird restart undone: what runs."""
    before, after = started.model_dump(mode="json"), applied.model_dump(mode="json")
    for op, path in list(_leaf_changes(before, after, ())):
        if _classify(op, path, applied)[1] != RESTART_CHOIRD:
            continue
        *parents, leaf = path
        here, there = after, before
        for key in parents:
            here, there = here[key], there[key]
        if op == "+":
            del here[leaf]
        else:
            here[leaf] = there[leaf]
    return after


def secret_changes(running: SecretStore, staged: SecretStore) -> list[ConfigChange]:
    """Secrets added, removed or changed (names only): they land with `choirctl secret apply`."""
    ops: dict[str, Op] = {name: "+" for name in staged.names() if name not in running}
    ops.update({name: "-" for name in running.names() if name not in staged})
    ops.update(
        {
            name: "~"
            for name in staged.names()
            if name in running
            and staged.get(name).get_secret_value() != running.get(name).get_secret_value()
        }
    )
    return [
        ConfigChange(ops[name], "secrets.json", name, "hot-reload", SECRET_APPLY)
        for name in sorted(ops)
    ]


def _leaf_changes(
    before: Any, after: Any, path: tuple[str, ...]
) -> Iterator[tuple[Op, tuple[str, ...]]]:
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in sorted(set(before) | set(after)):
            here = (*path, key)
            if key not in before:
                yield "+", here
            elif key not in after:
                yield "-", here
            else:
                yield from _leaf_changes(before[key], after[key], here)
    elif before != after:
        yield "~", path


def _classify(op: Op, path: tuple[str, ...], staged: ChoirConfig) -> tuple[Scope, str]:
    section = path[0]
    if section in HOT_SECTIONS:
        return "hot-reload", APPLY
    if section == "embedding" and len(path) > 1 and path[1] in EMBEDDING_HOT_FIELDS:
        return "hot-reload", APPLY  # choird's memory service swaps its provider (§16.1)
    if section == "global_repo":
        return "restart-required", "choirctl agent update-all"
    if section == "agents" and len(path) > 2 and path[2] == "spend_cap":
        return "hot-reload", APPLY  # in the agent's dynamic config: its next LLM call checks it
    if section == "agents" and len(path) > 1:
        agent = path[1]
        if len(path) == 2 and op == "+":
            return "restart-required", f"choirctl agent start {agent}"
        if len(path) == 2 and op == "-":
            return "restart-required", f"choirctl agent stop {agent}"
        return "restart-required", f"choirctl agent update {agent}"
    if section in LEASED_SECTIONS and section not in CHOIRD_SECTIONS and len(path) > 1:
        return "restart-required", _update_users(staged, LEASED_SECTIONS[section], path[1])
    return "restart-required", RESTART_CHOIRD


def _update_users(config: ChoirConfig, role: str, name: str) -> str:
    users = sorted(
        agent_id
        for agent_id, agent in config.agents.items()
        if getattr(agent.defaults, role) == name
    )
    if not users:
        return "the next choirctl agent start that binds it"
    if len(users) == 1:
        return f"choirctl agent update {users[0]}"
    return "choirctl agent update-all"
