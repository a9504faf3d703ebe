"""Every choirctl action the console offers: the palette's entries and the README table.

One `ConsoleAction` per (choirctl command, console way of doing it). The command itself — its
name, help, arguments and operator verb — comes from the one catalogue, `choir.commands`; what
is kept here is the console's own: the palette title, how the answer is shown (`mode`), the
confirmation, the tab and keys that do the same. `tui.commands` turns each into a command
palette entry and runs it: it asks for the arguments (pre-filled from what is selected, checked
against what choird listed), confirms what changes something, calls the verb and shows the
answer. Actions that a tab does with its own screen (`view`) open that tab, and `then` names the
tab's action to start there (the Config tab's load, for one).

`tests/tui/test_parity.py` holds this list against the catalogue and choirctl's command tree
both ways, and against the README's "choir tui ↔ choirctl" table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from choir.commands import Command, Param, command
from choir.ctl.memory.key import read_memory_key

Mode = Literal["call", "show", "report", "view"]
"""`call` runs the verb and notifies the outcome; `show` puts its answer on a screen; `report`
follows a verb's progress items until its result; `view` opens a tab (and runs `then` there)."""

RESOLVER: Final = "choir tui"
"""`by` of approvals answered from the console."""
RECOVER_CHOICES: Final = {"resume": "resume", "read-only": "read_only", "abort": "abort"}
"""choirctl's `--choice` words and the wire's."""


@dataclass(frozen=True)
class ConsoleAction:
    """One way the console does what one catalogued command does."""

    spec: Command
    """The catalogued command (`choir.commands`): name, help, arguments, verb."""
    title: str
    """The palette entry."""
    mode: Mode
    asks: tuple[str, ...] | None = None
    """The arguments asked, by name (None: every one an operator gives)."""
    required: tuple[str, ...] = ()
    """Arguments the catalogue leaves optional that this way of doing it needs."""
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
    notice: str | None = None
    """The notification after a `call` when the catalogue's `done` does not fit this way."""

    @property
    def command(self) -> str:
        """The choirctl command, e.g. `approval approve`."""
        return self.spec.name

    @property
    def verb(self) -> str | None:
        """The operator verb called."""
        return self.spec.verb

    @property
    def help(self) -> str:
        return self.spec.summary

    @property
    def args(self) -> tuple[Param, ...]:
        """The arguments the palette asks for, in order."""
        return tuple(
            param
            for param in self.spec.params
            if param.operator and (self.asks is None or param.name in self.asks)
        )

    def optional(self, arg: Param) -> bool:
        """Whether an empty answer is accepted (it leaves the field out)."""
        return arg.optional and arg.name not in self.required

    @property
    def done(self) -> str:
        """The notification after a `call`, formatted with the arguments."""
        return self.notice or self.spec.done or "{command}: done"

    def payload(self, answers: dict[str, str]) -> dict[str, Any]:
        """The verb's payload from the arguments the operator gave."""
        values: dict[str, Any] = dict(answers)
        if values.get("choice"):
            values["choice"] = RECOVER_CHOICES.get(values["choice"], values["choice"])
        for param in self.args:
            if param.kind == "key_file" and values.get(param.name):
                # read and checked here, on the operator's machine: the key, never the path,
                # goes to choird, and a bad one never leaves the console (a UsageError)
                key = read_memory_key(Path(values[param.name]), "memory key file")
                values[param.name] = key.hex()
        return {**self.fixed, **self.spec.payload(values)}


def action(name: str, title: str, mode: Mode, **console: Any) -> ConsoleAction:
    """The console's way of doing the catalogued command `name`."""
    return ConsoleAction(command(name), title, mode, **console)


ACTIONS: tuple[ConsoleAction, ...] = (
    action("status", "choird: status", "show", key="header"),
    action(
        "choird restart", "choird: restart in place (agents keep running)", "call",
        confirm="Restart choird? It re-executes itself and adopts its agents, which keep "
        "running; the console reconnects.",
        notice="choird restarting; agents keep running",
    ),
    # agents
    action("agent list", "Agents: list", "view", view="agents", key="1"),
    action("agent status", "Agent: status", "show"),
    action("agent start", "Agent: start", "call", key="1 s"),
    action(
        "agent stop", "Agent: stop (graceful)", "call",
        confirm="Stop {agent_id}? It finishes its step and writes its session summary.",
        key="1 x",
    ),
    action(
        "agent restart", "Agent: restart (same session)", "call",
        confirm="Restart {agent_id}? It stops gracefully and resumes the same session.",
        key="1 r",
    ),
    action("agent build", "Agent: build its image (if anything changed)", "report"),
    action(
        "agent update", "Agent: update (build if changed, redeploy)", "report",
        confirm="Update {agent_id}? It is rebuilt if its repos changed and restarted.",
    ),
    action(
        "agent update-all", "Agents: update all", "report",
        confirm="Update every agent, one after another?",
    ),
    action(
        "agent rollback", "Agent: roll back to its previous image (or an image/commit)", "report",
        confirm="Roll back {agent_id}? It is restarted on the older image, same session.",
        danger=True, key="1 z",
    ),
    action("agent verify", "Agent: verify the security profile", "show"),
    # sessions
    action("session list", "Sessions: list", "show"),
    action("session events", "Session: events (live timeline)", "view", view="events", key="5"),
    action("session messages", "Session: its messages in order (tool calls as sentences)", "view",
           view="memory", then="browse", key="m v"),
    action("session cores", "Session: core jobs", "view", view="cores", key="4"),
    action("session locks", "Session: lock table", "view", view="locks", key="3"),
    action(
        "session cancel", "Session: cancel a core job", "call",
        confirm="Cancel core job {job_name}? It stops at its next safe point.", key="4 c",
    ),
    action("session inject", "Session: instruct a core job", "call"),
    action("session compact", "Session: compact working memory", "call"),
    action(
        "session recover", "Session: list calls a crash interrupted", "show",
        asks=("session_id",),
    ),
    action(
        "session recover", "Session: decide interrupted calls (resume/read-only/abort)", "call",
        required=("choice",),
        confirm="{choice} the calls a crash interrupted in {session_id}?",
        notice="asked {session_id} to {choice}",
    ),
    # approvals
    action("approval list", "Approvals: pending", "view", view="approvals", key="6"),
    action("approval show", "Approval: show", "show"),
    action(
        "approval approve", "Approval: approve", "call",
        confirm="Approve {approval_id}? The agent is told at once.", key="6 a",
        fixed={"by": RESOLVER},
    ),
    action(
        "approval approve", "Approval: approve and restart (a config change needing a restart)",
        "call",
        confirm="Approve {approval_id} and restart what it needs? choird restarts the agents "
        "the change needs (its own changes wait for its next start).",
        key="6 R", fixed={"by": RESOLVER, "restart": True},
        notice="{approval_id} approved; restarting what it needs",
    ),
    action(
        "approval reject", "Approval: reject", "call",
        confirm="Reject {approval_id}? The agent is told at once.", danger=True, key="6 r",
        fixed={"by": RESOLVER},
    ),
    action(
        "approval extend", "Approval: extend a paused budget", "call",
        confirm="Extend {approval_id} by {amount}? The paused lane resumes at once.",
        fixed={"by": RESOLVER},
    ),
    action(
        "tool register", "Tool: register an approved tool's implementation", "call",
        confirm="Register the tool on {branch} for {agent_id}? Its branch is merged, the agent "
        "rebuilt and updated (session resumed).",
        notice="{agent_id}: registering {branch} ended; its approval (tab 6) says how",
    ),
    # workspaces
    action("workspace list", "Workspaces: list with leases", "view", view="workspaces", key="0"),
    action(
        "workspace reset", "Workspace: reset (delete its files)", "call",
        confirm="Reset workspace {name}? Every file in it is deleted; its holder is stopped first.",
        danger=True, key="0 r",
    ),
    # models and voices
    action("model list", "Models: list", "show"),
    action("model get", "Model: the agent's current model", "show"),
    action("model set", "Model: switch a running agent's model", "call"),
    action("voice list", "Voices: list profiles", "show"),
    action("voice get", "Voice: the agent's current profile", "show"),
    action("voice set", "Voice: switch a running agent's profile", "call"),
    # memory and knowledge
    action("memory search", "Memory: search the selected agent's memory", "view", view="memory",
           then="search", key="m /"),
    action("memory show", "Memory: show an item and its source events", "show"),
    action("memory stats", "Memory: stats per agent", "show", key="m"),
    action("memory about", "Memory: what an agent learnt from a user", "view", view="memory",
           then="about", key="m a"),
    action(
        "memory forget", "Memory: forget a knowledge item (its versions and vector too)", "call",
        confirm="Forget {ref} from {agent_id}'s memory, with its versions and vector? It cannot "
        "be undone.", danger=True, fixed={"by": RESOLVER},
    ),
    action("knowledge list", "Knowledge: list an agent's items", "view", view="memory",
           then="knowledge", key="m k"),
    action("knowledge show", "Knowledge: show an item", "show"),
    action("knowledge source", "Knowledge: open the session events an item came from", "show"),
    action("knowledge expand", "Knowledge: one step down the summary tree (to its events)", "show"),
    action("knowledge put", "Knowledge: remember a text", "call",
           fixed={"by": RESOLVER}),
    action("knowledge add", "Knowledge: add a named item", "call",
           fixed={"by": RESOLVER}),
    action("knowledge write", "Knowledge: replace an item's text (keeps a version)", "call",
           fixed={"by": RESOLVER}),
    action("knowledge rename", "Knowledge: rename an item", "call"),
    action("knowledge alias", "Knowledge: give an item another name", "call"),
    action("knowledge history", "Knowledge: an item's versions", "show"),
    action(
        "knowledge restore", "Knowledge: restore an item's earlier version", "call",
        confirm="Write version {version} of {ref} as its newest version?", fixed={"by": RESOLVER},
    ),
    action("knowledge link", "Knowledge: link two items with a typed edge", "call"),
    action("knowledge unlink", "Knowledge: remove the edges between two items", "call"),
    action(
        "knowledge delete", "Knowledge: delete an item", "call",
        confirm="Delete {ref} from {agent_id}'s knowledge?", danger=True,
    ),
    action(
        "memory reembed", "Memory: re-embed an agent's memory (configured model)", "report",
        required=("agent_id",),
        confirm="Re-embed {agent_id}'s memory with the configured embedding model? Until it "
        "is done, what is not re-embedded yet is found by text only.",
    ),
    action(
        "memory backfill-tools", "Memory: describe past sessions' tool calls (once each)",
        "report", required=("agent_id",),
    ),
    # gateways
    action("gateway status", "Gateways: bots, DMs, sends", "view", view="gateways", key="w"),
    action("usage", "Usage: calls and cost per agent per day (k: one kind of call)", "view",
           view="usage", key="u"),
    # the recovery inbox
    action("inbox list", "Inbox: what waits for a decision after a restart", "view",
           view="inbox", key="b"),
    action("inbox resolve", "Inbox: decide the highlighted item", "view", view="inbox",
           then="decide", key="b d"),
    # logs and chat
    action("logs", "Logs: tail choird's or the selected agent's", "view", view="logs", key="8"),
    action("chat", "Chat: the console DM with the selected agent", "view", view="chat", key="7"),
    # config and secrets
    action("config load", "Config: load and validate config.json", "view", view="config",
           then="load", key="9 l"),
    action("config diff", "Config: staged vs running", "view", view="config", then="refresh",
           key="9"),
    action("config apply", "Config: apply the staged config", "view", view="config",
           then="apply", key="9 a"),
    action("config show", "Config: the running config", "show"),
    action("secret list", "Secrets: names and where they are used", "show"),
    action("secret apply", "Secrets: reload secrets.json", "view", view="config",
           then="secret_apply", key="9 s"),
)  # fmt: skip
"""The console's actions, in palette order."""

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
