"""Every choirctl action the console offers, as data: the palette's entries and the README table.

One `ConsoleAction` per (choirctl command, console way of doing it). `tui.commands` turns each
into a command palette entry and runs it: it asks for the arguments (pre-filled from what is
selected, checked against what choird listed), confirms what changes something, calls the verb
and shows the answer. Actions that a tab does with its own screen (`view`) open that tab, and
`then` names the tab's action to start there (the Config tab's load, for one).

`tests/tui/test_parity.py` holds this catalogue against choirctl's command tree both ways, and
against the README's "choir tui ↔ choirctl" table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

Mode = Literal["call", "show", "report", "view"]
"""`call` runs the verb and notifies the outcome; `show` puts its answer on a screen; `report`
follows a verb's progress items until its result; `view` opens a tab (and runs `then` there)."""

Pick = Literal[
    "agent", "running_agent", "session", "job", "lane", "approval", "workspace", "llm", "voice",
    "recover_choice",
]  # fmt: skip
"""Where an argument's default and choices come from (see `tui.commands.options`)."""

RESOLVER: Final = "choir tui"
"""`by` of approvals answered from the console."""
RECOVER_CHOICES: Final = {"resume": "resume", "read-only": "read_only", "abort": "abort"}
"""choirctl's `--choice` words and the wire's."""


@dataclass(frozen=True)
class Arg:
    """One argument the palette asks for."""

    name: str
    """The verb's payload field."""
    label: str
    pick: Pick
    optional: bool = False
    """An empty answer leaves the field out (e.g. compact every lane)."""


@dataclass(frozen=True)
class ConsoleAction:
    """One way the console does what one choirctl command does."""

    command: str
    """The choirctl command, e.g. `approval approve`."""
    title: str
    """The palette entry."""
    mode: Mode
    verb: str | None = None
    """The operator verb called (None for a tab that does it itself)."""
    args: tuple[Arg, ...] = ()
    confirm: str | None = None
    """The question asked before calling, formatted with the arguments."""
    danger: bool = False
    view: str | None = None
    """The tab that shows or does the same."""
    then: str | None = None
    """The tab's `action_…` (without the prefix) to run after opening it."""
    key: str = ""
    """The keys that do it without the palette (tab key, then the tab's key), for help."""
    fixed: dict[str, Any] = field(default_factory=dict)
    """Payload fields that are always sent (e.g. `by`)."""
    done: str = "{command}: done"
    """The notification after a `call`, formatted with the arguments."""

    def payload(self, answers: dict[str, str]) -> dict[str, Any]:
        """The verb's payload from the arguments the operator gave."""
        payload: dict[str, Any] = {**self.fixed}
        for arg in self.args:
            value = answers.get(arg.name) or None
            if arg.pick == "recover_choice" and value is not None:
                value = RECOVER_CHOICES.get(value, value)
            if value is not None:
                payload[arg.name] = value
        return payload


AGENT = Arg("agent_id", "Agent", "agent")
RUNNING = Arg("agent_id", "Running agent", "running_agent")
SESSION = Arg("session_id", "Session", "session")
APPROVAL = Arg("approval_id", "Approval", "approval")

ACTIONS: tuple[ConsoleAction, ...] = (
    ConsoleAction("status", "choird: status", "show", "status", key="header"),
    # agents
    ConsoleAction("agent list", "Agents: list", "view", view="agents", key="1"),
    ConsoleAction("agent status", "Agent: status", "show", "agent.status", (AGENT,)),
    ConsoleAction(
        "agent start", "Agent: start", "call", "agent.start", (AGENT,), key="1 s",
        done="{agent_id} started",
    ),
    ConsoleAction(
        "agent stop", "Agent: stop (graceful)", "call", "agent.stop", (RUNNING,),
        confirm="Stop {agent_id}? It finishes its step and writes its session summary.",
        key="1 x", done="{agent_id} stopped",
    ),
    ConsoleAction(
        "agent restart", "Agent: restart (same session)", "call", "agent.restart", (RUNNING,),
        confirm="Restart {agent_id}? It stops gracefully and resumes the same session.",
        key="1 r", done="{agent_id} restarted",
    ),
    ConsoleAction(
        "agent build", "Agent: build its image (if anything changed)", "report", "agent.build",
        (AGENT,),
    ),
    ConsoleAction(
        "agent update", "Agent: update (build if changed, redeploy)", "report", "agent.update",
        (AGENT,), confirm="Update {agent_id}? It is rebuilt if its repos changed and restarted.",
    ),
    ConsoleAction(
        "agent update-all", "Agents: update all", "report", "agent.update_all",
        confirm="Update every agent, one after another?",
    ),
    ConsoleAction("agent verify", "Agent: verify the security profile", "show", "agent.verify",
                  (RUNNING,)),
    # sessions
    ConsoleAction("session list", "Sessions: list", "show", "session.list",
                  (Arg("agent_id", "Agent (empty: all)", "agent", optional=True),)),
    ConsoleAction("session events", "Session: events (live timeline)", "view", view="events",
                  key="5"),
    ConsoleAction("session cores", "Session: core jobs", "view", view="cores", key="4"),
    ConsoleAction("session locks", "Session: lock table", "view", view="locks", key="3"),
    ConsoleAction(
        "session cancel", "Session: cancel a core job", "call", "session.cancel",
        (SESSION, Arg("job_name", "Core job", "job")),
        confirm="Cancel core job {job_name}? It stops at its next safe point.",
        key="4 c", done="asked {session_id} to cancel {job_name}",
    ),
    ConsoleAction(
        "session compact", "Session: compact working memory", "call", "session.compact",
        (SESSION, Arg("lane", "Lane (empty: every lane)", "lane", optional=True)),
        done="asked {session_id} to compact",
    ),
    ConsoleAction("session recover", "Session: list calls a crash interrupted", "show",
                  "session.recover", (SESSION,)),
    ConsoleAction(
        "session recover", "Session: decide interrupted calls (resume/read-only/abort)", "call",
        "session.recover",
        (SESSION, Arg("choice", "Decision", "recover_choice"),
         Arg("job_name", "Held job (empty: every one)", "job", optional=True)),
        confirm="{choice} the calls a crash interrupted in {session_id}?",
        done="asked {session_id} to {choice}",
    ),
    # approvals
    ConsoleAction("approval list", "Approvals: pending", "view", view="approvals", key="6"),
    ConsoleAction("approval show", "Approval: show", "show", "approval.show", (APPROVAL,)),
    ConsoleAction(
        "approval approve", "Approval: approve", "call", "approval.approve", (APPROVAL,),
        confirm="Approve {approval_id}? The agent is told at once.", key="6 a",
        fixed={"by": RESOLVER}, done="{approval_id} approved",
    ),
    ConsoleAction(
        "approval reject", "Approval: reject", "call", "approval.reject", (APPROVAL,),
        confirm="Reject {approval_id}? The agent is told at once.", danger=True, key="6 r",
        fixed={"by": RESOLVER}, done="{approval_id} rejected",
    ),
    # workspaces
    ConsoleAction("workspace list", "Workspaces: list with leases", "view", view="workspaces",
                  key="0"),
    ConsoleAction(
        "workspace reset", "Workspace: reset (delete its files)", "call", "workspace.reset",
        (Arg("name", "Workspace", "workspace"),),
        confirm="Reset workspace {name}? Every file in it is deleted; its holder is stopped first.",
        danger=True, key="0 r", done="workspace {name} reset",
    ),
    # models and voices
    ConsoleAction("model list", "Models: list", "show", "model.list"),
    ConsoleAction("model get", "Model: the agent's current model", "show", "model.get",
                  (AGENT,)),
    ConsoleAction(
        "model set", "Model: switch a running agent's model", "call", "model.set",
        (RUNNING, Arg("llm", "Model", "llm")), done="{agent_id} now uses {llm}",
    ),
    ConsoleAction("voice list", "Voices: list profiles", "show", "voice.list"),
    ConsoleAction("voice get", "Voice: the agent's current profile", "show", "voice.get",
                  (AGENT,)),
    ConsoleAction(
        "voice set", "Voice: switch a running agent's profile", "call", "voice.set",
        (RUNNING, Arg("voice_profile", "Voice profile", "voice")),
        done="{agent_id} now speaks with {voice_profile}",
    ),
    # logs and chat
    ConsoleAction("logs", "Logs: tail choird's or the selected agent's", "view", view="logs",
                  key="8"),
    ConsoleAction("chat", "Chat: the console DM with the selected agent", "view", view="chat",
                  key="7"),
    # config and secrets
    ConsoleAction("config load", "Config: load and validate config.json", "view", view="config",
                  then="load", key="9 l"),
    ConsoleAction("config diff", "Config: staged vs running", "view", view="config",
                  then="refresh", key="9"),
    ConsoleAction("config apply", "Config: apply the staged config", "view", view="config",
                  then="apply", key="9 a"),
    ConsoleAction("config show", "Config: the running config", "show", "config.show"),
    ConsoleAction("secret list", "Secrets: names and where they are used", "show",
                  "secret.list"),
    ConsoleAction("secret apply", "Secrets: reload secrets.json", "view", view="config",
                  then="secret_apply", key="9 s"),
)  # fmt: skip
"""The catalogue, in palette order."""

OFFLINE: Final = {
    "init": "sets up $CHOIR_HOME before any choird runs (the console needs a running choird)",
    "agent init": "scaffolds an agent's repo and config.json entry on disk, without choird",
    "config check": "validates the files on disk without choird; the console's config load "
    "validates them in choird and lists the same problems",
    "secret set": "secret values are typed at a no-echo terminal prompt and stored 0600; the "
    "console never handles secret values",
    "secret delete": "edits secrets.json on disk, like secret set; apply with secret apply",
    "schema": "prints JSON Schemas for writing manifests and skills; nothing to operate",
}
"""choirctl commands with no console entry, and why (they work on files, not on choird)."""


def commands() -> set[str]:
    """The choirctl commands the console covers."""
    return {action.command for action in ACTIONS}
