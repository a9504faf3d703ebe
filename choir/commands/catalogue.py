"""Every operator command, once: choirctl's commands, the console DM's and (next) Telegram's.

Each front end is derived from this list: choirctl takes its help texts from it (and
`tests/commands/test_catalogue.py` holds choirctl's command tree to it both ways), the TUI's
command palette (`tui.actions`) its names, arguments, verbs and help, and the DMs
(`choir.commands.dm`, `choir.daemon.gateway.commands`) their §19.3 spellings and handlers.
Adding a command is one entry here and, if it is new to choird, one operator verb.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from choir.commands.model import ADMIN, DMS, EVERYONE, Command, Param

F = TypeVar("F", bound=Callable[..., Any])

AGENT = Param("agent_id", "Agent", "agent")
RUNNING = Param("agent_id", "Running agent", "running_agent")
NAMED_RUNNING = Param("agent_id", "Running agent", "running_agent", fill="bound_or_named")
"""The bound agent; an admin DM may name another (`/stop <agent-id>`)."""
SESSION = Param("session_id", "Session", "session")
APPROVAL = Param("approval_id", "Approval", "approval")
ANSWERED = Param("approval_id", "Approval", "approval", fill="pick")
"""In a DM: none picks the only pending one, or answers with a numbered list to choose from."""
ONLY_BOUND = Param("agent_id", "Agent", "agent", optional=True, fill="scoped", operator=False)
"""A regular DM only sees and answers its bound agent's approvals (§19.6)."""
RESOLVER = Param("by", "Answered by", "resolver", optional=True, operator=False)
RESTART = Param(
    "restart", "Also restart what a config change needs", "flag", optional=True, operator=False
)
"""The restart choice (§8.10): choirctl's `--restart`, the console's own action, a DM's
trailing `restart`, Telegram's third button."""
MEMORY_ITEM = Param("item_id", "Memory item id", "item")
KNOWLEDGE_ITEM = Param("ref", "Knowledge item (name, alias or id)", "item")
NEW_ITEM_MEMORY = Param("memory", "Memory (empty: knowledge)", "memory_class", optional=True)
"""A new item's memory: system, knowledge, app or personal (choirctl's `--memory`)."""
PERSONAL_USER = Param(
    "user", "User (the DM whose sessions see it)", "word", optional=True,
    asked_if=("memory", "personal"),
)  # fmt: skip
"""A personal item's user (choirctl's `--user`): asked only for a personal item."""

MEMORY_KEY_FILE = Param(
    "memory_key", "Memory key file (a path on this machine)", "key_file", optional=True,
    fill="none",
)  # fmt: skip
"""The key of the agent's encrypted memories (choirctl's `--memory-key-file`): an operator front
end reads the file on its own machine and sends the key; never a DM's (`none`): a key must not
travel through a chat."""

CATALOGUE: Final[tuple[Command, ...]] = (
    # set-up and files (no choird)
    Command(
        "init",
        "Set up $CHOIR_HOME so that `choir up` runs with no editing.\n\nEmbedded Postgres, a "
        "console DM, a scripted demo model and the agent agent-1.\n\nWrites config.json, "
        "secrets.json (0600), the global repo and agent-1's repo; all or nothing.",
    ),
    Command("schema", "Print the JSON Schema of a protocol model, or list the schema names."),
    Command(
        "status",
        "Show choird's health: version, uptime, config version, Postgres, agents, approvals."
        "\n\nExits 6 when choird is not running.",
        verb="status",
    ),
    Command(
        "choird restart",
        "Restart choird in place; its agents keep running, their sessions too.\n\n"
        "choird stops serving, re-executes itself (same pid) and adopts its agents; what\n"
        "config apply left for a choird restart takes effect. Refused, nothing stopped, when\n"
        "it cannot re-execute itself or its config would not load. Same as choir restart.",
        verb="choird.restart",
    ),
    Command(
        "chat",
        "Chat with an agent over the console DM (no Telegram bot needed).",
        verb="chat.send",
        params=(AGENT, Param("text", "Message", "text")),
    ),
    Command(
        "logs",
        "Print choird's or an agent's log, then follow it like tail -f until Ctrl-C.\n\nWith "
        "--json each stream item is printed as one JSON object per line.",
        verb="logs",
        params=(Param("source", "choird or an agent", "word"),),
    ),
    # config and secrets
    Command(
        "config check",
        "Validate config.json and secrets.json offline, reporting every problem at once.\n\n"
        "Exits 3 when there are errors; warnings (placeholders, unset secrets) do not fail.",
    ),
    Command(
        "config load",
        "Validate $CHOIR_HOME in choird and stage it; prints what would change.\n\nExits 3 "
        "listing every problem when the config is invalid; then nothing is staged.",
        ADMIN, "config.load", dm="config load",
        dm_help="stage config.json and secrets.json; says what would change",
    ),
    Command(
        "config diff",
        "Show staged vs running config, each change tagged hot-reload or restart-required.\n\n"
        "Exits 5 when nothing is staged (run choirctl config load first).",
        ADMIN, "config.diff", dm="config diff", dm_help="staged vs running config",
    ),
    Command(
        "config apply",
        "Make the staged config the running one and push it to running agents.\n\n"
        "Restart-required changes are listed with the command that applies them.",
        ADMIN, "config.apply", dm="config apply",
        dm_help="apply the staged config (hot-reloadable changes)",
    ),
    Command(
        "config show",
        "Print the config choird runs (secret names only, never values) and its version.",
        verb="config.show",
    ),
    Command(
        "secret set",
        "Add or replace a secret; the value is never printed.\n\nRunning agents keep the old "
        "value until choird pushes the new one.",
    ),
    Command(
        "secret list",
        "List secret names (never values) and the config paths that reference each.\n\n"
        "Secrets that config.json references but secrets.json lacks are marked and warned about.",
        ADMIN, "secret.list", dm="secret list", dm_help="secret names, never values",
    ),
    Command(
        "secret delete",
        "Delete a secret.\n\nConfig entries that still reference it are listed as a warning.",
    ),
    Command(
        "secret apply",
        "Reload secrets.json in choird and refresh the running agents that use a changed secret."
        "\n\nExits 3 when secrets.json cannot be used (e.g. readable by others); 6 without choird.",
        verb="secret.apply",
    ),
    # agents
    Command(
        "agent init",
        "Add an agent to config.json with placeholder defaults and scaffold its repo.\n\n"
        "The repo gets Dockerfile, identity/SOUL.md, identity/SOUL-CORE.md, tools/ and skills/."
        "\n\nThe agent is not built or started; fill in its defaults, then run choirctl config "
        "check.",
    ),
    Command(
        "agent list",
        "List every configured agent: state, session, uptime, config version, bindings (choird).",
        ADMIN, "agent.list", dm="agent list", dm_help="every agent and its state",
    ),
    Command(
        "agent status",
        "Show one agent in detail: lanes, skill, budgets, bindings, uptime, config version,\n"
        "runtime and image.",
        EVERYONE, "agent.status", (AGENT,), dm="status", shows="status",
        dm_help="the agent's lanes, budgets, skill, uptime",
    ),
    Command(
        "agent start",
        "Start an agent: lease its resources, start (or resume) its session and its process.",
        ADMIN, "agent.start",
        (Param("agent_id", "Agent", "agent", fill="given"),
         Param("overrides", "Bindings", "settings", optional=True, operator=False),
         MEMORY_KEY_FILE),
        dm="start",
        dm_help="start an agent; key=value overrides its default bindings (workspace, llm, dm…)",
        done="{agent_id} started",
    ),
    Command(
        "agent stop",
        "Stop an agent gracefully: it summarizes, flushes its events and ends its session.\n\n"
        "A session summary that could not be made (§11.8) is a warning on stderr; the stop "
        "still\nsucceeded (exit 0).",
        EVERYONE, "agent.stop", (NAMED_RUNNING,), dm="stop",
        dm_help="stop the agent gracefully (an admin DM may name any agent)",
        done="{agent_id} stopped",
    ),
    Command(
        "agent build",
        "Build (or find up to date) the agent's image; does not start or restart the agent.\n\n"
        "Fetches the global and agent repos, validates tools, skills and Dockerfiles, builds "
        "the\nchoir-base image if its inputs changed and the agent image FROM it, tagged\n"
        "choir-agent-<id>:<agent commit>-<global commit>. Needs a Docker engine.",
        ADMIN, "agent.build", (Param("agent_id", "Agent", "agent", fill="given"),),
        dm="agent build", dm_help="build an agent's image", streams=True,
    ),
    Command(
        "agent restart",
        "Stop an agent gracefully, then start it again resuming the same session.\n\n"
        "Same bindings as its start; transient model set/voice set overrides revert.",
        EVERYONE, "agent.restart", (NAMED_RUNNING,), dm="restart",
        dm_help="stop and start the agent again, same session (an admin DM may name any agent)",
        done="{agent_id} restarted",
    ),
    Command(
        "agent update",
        "Build the agent if its repos changed, then stop it and start it on the new build.\n\n"
        "The session resumes. An agent that is not running is only built; one that runs the\n"
        "latest build is left alone. A failed build leaves the agent running as it was.",
        ADMIN, "agent.update", (Param("agent_id", "Agent", "agent", fill="bound_or_named"),),
        dm="update",
        dm_help="build if changed, then redeploy the agent (default: this DM's)", streams=True,
    ),
    Command(
        "agent update-all",
        "Build every agent that changed and redeploy the running ones, one after another.\n\n"
        "Each agent is built, redeployed, skipped or failed (with the reason); a failure does "
        "not\nstop the others. Exit code 1 if any failed.",
        ADMIN, "agent.update_all", dm="update-all",
        dm_help="build and redeploy every agent", streams=True,
    ),
    Command(
        "agent rollback",
        "Redeploy the agent's previous image, or a chosen one, resuming its session.\n\n"
        "Without --to: the newest image agent build kept that is older than the one it runs. "
        "--to\nnames a kept image (id, tag or image version) or a commit of the agent repo, "
        "built first.\nThe agent stays on that image through restarts until choirctl agent "
        "update. A stopped\nagent is only pinned to it. Needs the docker runtime.",
        verb="agent.rollback",
        params=(AGENT, Param("to", "Image or commit (empty: the previous image)", "word",
                             optional=True)),
        streams=True,
    ),
    Command(
        "agent verify",
        "Check a running agent's container against the declared security profile.\n\n"
        "Checks dropped capabilities, no-new-privileges, read-only root, tmpfs /tmp and /run,\n"
        "CPU/memory/pids limits, default seccomp, no privileged mode, Docker socket, host\n"
        "namespaces or devices, that only /workspace and the agent socket are mounted, a uid "
        "other\nthan 0, a nosuid,nodev and private workspace, no Unix socket within reach, and "
        "egress\nfiltering. On the process runtime's bwrap sandbox: its namespaces, "
        "capabilities,\nno-new-privileges, the setuid filter, the workspace bind, writable "
        "paths, nosuid mounts and\nhidden host paths, read back from the kernel. Exits 1 if any "
        'item fails (an advisory "warn"\nitem does not count).',
        verb="agent.verify", params=(RUNNING,),
    ),
    # sessions
    Command(
        "session list",
        "List active and recent sessions, newest first.",
        verb="session.list",
        params=(Param("agent_id", "Agent (empty: all)", "agent", optional=True),),
    ),
    Command(
        "session events",
        "Print a session's committed events; --follow streams new ones as they are stored.\n\n"
        "An event too large to travel whole is stored as a preview and its artifact; --full "
        "reads\nsuch events back whole (with --json, the whole event is the `payload`). An "
        "answer holds at\nmost 512 KiB of events: read on from the `next_rev` it gives.\n\n"
        "With --json: one object when not following, one object per line when following.",
        EVERYONE, "session.events", (SESSION,), dm="events",
        dm_help="the session's last 20 events", dm_fixed={"limit": 20}, shows="events",
    ),
    Command(
        "session messages",
        "Print a session's messages in order: the user's, the agent's, each tool call told in "
        "one\nsentence (secrets redacted). --limit at a time; --offset reads on after a "
        "revision (the\n`next_offset` a page gives).",
        verb="session.messages", params=(SESSION,),
    ),
    Command(
        "session cores",
        "List a session's core jobs: name, state, skill and step, as they last reported.\n\n"
        "A job held after a crash shows `held: unknown outcome of <tool>`, and the command "
        "that\ndecides it follows the table.",
        EVERYONE, "session.cores", (SESSION,), dm="cores",
        dm_help="the core jobs: name, state, step",
    ),
    Command(
        "session locks",
        "Show a session's lock table (§9) as its agent last reported it: resource, mode, "
        "holders,\nwaiters and how long each lock has been held.",
        verb="session.locks", params=(SESSION,),
    ),
    Command(
        "session cancel",
        "Ask the agent to cancel one core job; it stops at its next safe point.",
        EVERYONE, "session.cancel", (SESSION, Param("job_name", "Core job", "job")),
        dm="cancel",
        dm_help="cancel a core job at its next safe point",
        done="asked {session_id} to cancel {job_name}",
    ),
    Command(
        "session inject",
        "Give one core job an instruction; it reads it at its next step, as if edge had "
        "injected it.",
        verb="session.inject",
        params=(
            SESSION,
            Param("job_name", "Core job", "job"),
            Param("text", "Instruction", "text"),
        ),
        done="asked {session_id} to pass the instruction to {job_name}",
    ),
    Command(
        "session compact",
        "Ask the agent to compact its working memory now.",
        EVERYONE, "session.compact",
        (SESSION, Param("lane", "Lane (empty: every lane)", "lane", optional=True, fill="none")),
        dm="compact",
        dm_help="compact the agent's working memory now", done="asked {session_id} to compact",
    ),
    Command(
        "session recover",
        "After a crash: list calls whose outcome is unknown, or decide what their jobs do.",
        verb="session.recover",
        params=(
            SESSION,
            Param("choice", "Decision", "recover_choice", optional=True),
            Param("job_name", "Held job (empty: every one)", "job", optional=True),
        ),
    ),
    # approvals
    Command(
        "approval list",
        "List pending approvals, oldest first.",
        EVERYONE, "approval.list", (ONLY_BOUND,), dm="approvals", shows="approvals",
        dm_help="pending approvals, numbered (a regular DM: its agent's only; admin: all)",
    ),
    Command(
        "approval show",
        "Show one approval: what was proposed, by which agent and session, when, and its "
        "outcome.",
        verb="approval.show", params=(APPROVAL,),
    ),
    Command(
        "approval approve",
        "Approve a pending approval; the agent is told at once. Exits 5 if already answered."
        "\n\nA config change that only a restart puts into effect is refused (exit 2, it stays "
        "pending) unless approved with the restart choice: choirctl's --restart, the console's "
        "approve and restart (R in the Approvals tab), `/approve <id> restart` in a DM or the "
        "Approve + restart button in Telegram.",
        EVERYONE, "approval.approve", (ANSWERED, ONLY_BOUND, RESOLVER, RESTART), dm="approve",
        dm_help="approve one: the only pending one, or a number from the list, or an id; "
        "`restart` after it applies a config change that needs a restart and restarts what it "
        "needs",
        done="{approval_id} approved",
    ),
    Command(
        "approval reject",
        "Reject a pending approval; the agent is told at once. Exits 5 if already answered.",
        EVERYONE, "approval.reject", (ANSWERED, ONLY_BOUND, RESOLVER), dm="reject",
        dm_help="reject one: the only pending one, or a number from the list, or an id",
        done="{approval_id} rejected",
    ),
    Command(
        "approval extend",
        "Answer a budget question (a budget_extension approval of a paused core job, of edge, "
        "or of a spend cap): extend the budget by AMOUNT (steps, tool calls, tokens, ms, or "
        "whole USD beyond a spend cap, as the question says) and the lane resumes where it "
        "paused. `approval approve` extends by the amount the question suggests, `approval "
        "reject` stops it. A spend cap's question only an admin may extend. Exits 5 if already "
        "answered.",
        EVERYONE, "approval.extend",
        (ANSWERED, Param("amount", "Amount", "word", metavar="amount"), ONLY_BOUND, RESOLVER),
        dm="extend", dm_help="extend a paused budget by an amount: <id|number> <amount>",
        done="{approval_id} extended by {amount}",
    ),
    # tools (§8.10's two-phase registration)
    Command(
        "tool register",
        "Register a human's implementation of an approved tool proposal: validate the proposal "
        "branch (the manifest loads, the executable is committed and no longer the stub, "
        "nothing else changes), merge it into the agent repo's ref, build, and update the agent "
        "resuming its session. A step that fails (validate, merge, build, update) is undone — the "
        "agent runs as it did — and the approval waits for the implementation again, `approval "
        "show` saying which step failed and why: fix the branch and register again. Exits 4 for "
        "an unknown agent or branch, 2 for a branch not ready, 1 if the register failed.",
        verb="tool.register",
        params=(AGENT, Param("branch", "Proposal branch", "word", metavar="branch")),
    ),
    # workspaces
    Command(
        "workspace list",
        "List workspaces with their path and the agent (session) holding each.",
        ADMIN, "workspace.list", dm="workspace list", dm_help="workspaces and who holds each",
    ),
    Command(
        "workspace reset",
        "Delete everything inside a workspace, keeping the directory.\n\nAn agent holding the "
        "workspace is stopped first, gracefully. Asks for confirmation on a\nterminal; "
        "elsewhere pass --yes.",
        ADMIN, "workspace.reset", (Param("name", "Workspace", "workspace"),),
        dm="workspace reset",
        dm_help="delete everything in a workspace (its holder is stopped first)",
        done="workspace {name} reset",
    ),
    # models and voices
    Command(
        "model list",
        "List the named LLM models and TTS providers of the running config.",
        verb="model.list",
    ),
    Command(
        "model get",
        "Show an agent's current LLM model and voice profile.",
        EVERYONE, "model.get", (AGENT,), dm="model", dm_help="the agent's current LLM model",
    ),
    Command(
        "model set",
        "Switch a running agent's LLM until its next start (exit 5 if it is not running).",
        EVERYONE, "model.set", (RUNNING, Param("llm", "Model", "llm")), dm="model llm",
        dm_help="switch the agent's LLM until its next start",
        done="{agent_id} now uses {llm}",
    ),
    Command(
        "voice list", "List the named voice profiles of the running config.", verb="voice.list"
    ),
    Command(
        "voice get",
        "Show an agent's current voice profile.",
        EVERYONE, "voice.get", (AGENT,), dm="voice", dm_help="the agent's current voice profile",
    ),
    Command(
        "voice set",
        "Switch a running agent's voice profile until its next start (exit 5 if not running).",
        EVERYONE, "voice.set", (RUNNING, Param("voice_profile", "Voice profile", "voice")),
        dm="voice", dm_help="switch the agent's voice profile until its next start",
        done="{agent_id} now speaks with {voice_profile}",
    ),
    # memory and knowledge
    Command(
        "memory search",
        "Search an agent's session memory or knowledge, best hits first.\n\n"
        "Modes: hybrid (the default: text and vector ranks fused), semantic, text and, for "
        "the\nsession store, session_detail (a promoted session's detail chunks: --session); "
        "for knowledge,\nrelevance (BM25, meaning, recent use and importance; what it returns "
        "counts as used).\nSemantic and hybrid search by text when no embedder answers, and "
        "say so.",
        verb="memory.search",
        params=(
            AGENT,
            Param("query", "Query", "text", optional=True),
            Param("store", "Store (session or knowledge)", "memory_store", optional=True),
            Param("mode", "Mode", "memory_mode", optional=True),
            Param("session_id", "Promoted session (session_detail)", "word", optional=True),
        ),
    ),
    Command(
        "memory show",
        "Show one memory item by id: a session chunk with the events it was cut from, or a\n"
        "knowledge item.",
        verb="memory.show",
        params=(MEMORY_ITEM, Param("agent_id", "Agent (empty: any)", "agent", optional=True)),
    ),
    Command(
        "memory stats",
        "Show memory per agent: chunks and sessions per tier, knowledge items, vectors "
        "missing,\nindex sizes; and the embedding queue and provider.",
        verb="memory.stats",
        params=(Param("agent_id", "Agent (empty: all)", "agent", optional=True),),
    ),
    Command(
        "memory about",
        "List what an agent learnt from a user: the knowledge items its sessions with that\n"
        "user (a DM's name, or its user id on its gateway) wrote, oldest first. Edit one with\n"
        "knowledge write, remove one with memory forget.",
        ADMIN, "memory.about",
        (AGENT, Param("user", "User (a DM name or gateway user id)", "word", metavar="user")),
        dm="memory about", shows="knowledge",
        dm_help="what the agent learnt from a user (a DM name or gateway user id)",
    ),
    Command(
        "memory forget",
        "Forget a knowledge item: remove it, its versions and its vector from every memory\n"
        "store and index, in one transaction; choird records who forgot it and when (the\n"
        "session event log keeps its own record). Asks first on a terminal; elsewhere --yes\n"
        "is required. Exits 4 if there is no such item.",
        ADMIN, "memory.forget", (AGENT, KNOWLEDGE_ITEM._replace(metavar="name"), RESOLVER),
        dm="memory forget", dm_help="forget one of the agent's knowledge items, versions too",
        done="{ref} forgotten from {agent_id}'s memory",
    ),
    Command(
        "knowledge list",
        "List an agent's knowledge items, oldest first.",
        verb="knowledge.list", params=(AGENT,),
    ),
    Command(
        "knowledge show",
        "Show one knowledge item by name, alias or id.",
        verb="knowledge.show", params=(AGENT, KNOWLEDGE_ITEM),
    ),
    Command(
        "knowledge source",
        "Show where a knowledge item's content came from: the agent's session, its user and the\n"
        "tool call that wrote it, with the user message before the call (from the session's\n"
        "event log); or the operator front end that wrote it. Items written before choir kept\n"
        "this say \"source unknown\".",
        verb="knowledge.source", params=(AGENT, KNOWLEDGE_ITEM),
    ),
    Command(
        "knowledge expand",
        "Go one step down the summary tree: a roll-up (rollup/...) to the session summaries it\n"
        "covers, a session summary (summary/...) to its compaction archives and tool leaf, an\n"
        "archive or a tool leaf to the session messages it covers (secrets redacted; --limit at\n"
        "a time, --offset reads on). Every user's items and sessions.",
        verb="knowledge.expand", params=(AGENT, KNOWLEDGE_ITEM),
    ),
    Command(
        "knowledge put",
        "Remember a text in an agent's knowledge; with --name, write the item with that name\n"
        "(or add it when there is none).\n\nThe item is embedded at once when the embedder "
        "answers (else found by text until a\nbackfill). Texts over 32 KiB are refused.",
        verb="knowledge.put",
        params=(
            AGENT,
            Param("text", "Text to remember", "text"),
            Param("name", "Name (empty: derived from the text)", "word", optional=True),
            NEW_ITEM_MEMORY,
            PERSONAL_USER,
        ),
        done="stored in {agent_id}'s knowledge",
    ),
    Command(
        "knowledge add",
        "Add a knowledge item; with --name, named so (exits 5 if an item answers to it).",
        verb="knowledge.add",
        params=(
            AGENT,
            Param("text", "Text to remember", "text"),
            Param("name", "Name (empty: derived from the text)", "word", optional=True),
            NEW_ITEM_MEMORY,
            PERSONAL_USER,
        ),
        done="added to {agent_id}'s knowledge",
    ),
    Command(
        "knowledge write",
        "Replace the text of a knowledge item (or only its tags, loc, type or data); its "
        "previous\nversion is kept (knowledge history).",
        verb="knowledge.write",
        params=(AGENT, KNOWLEDGE_ITEM, Param("text", "New text", "text")),
        done="{ref} written",
    ),
    Command(
        "knowledge rename",
        "Rename a knowledge item (exits 5 if another item answers to the new name).",
        verb="knowledge.rename",
        params=(AGENT, KNOWLEDGE_ITEM, Param("name", "New name", "word")),
        done="{ref} renamed to {name}",
    ),
    Command(
        "knowledge alias",
        "Let a knowledge item answer to another name too (exits 5 if another item does).",
        verb="knowledge.alias",
        params=(AGENT, KNOWLEDGE_ITEM, Param("alias", "Alias", "word")),
        done="{ref} now also answers to {alias}",
    ),
    Command(
        "knowledge history",
        "List a knowledge item's versions, newest first.",
        verb="knowledge.history", params=(AGENT, KNOWLEDGE_ITEM),
    ),
    Command(
        "knowledge restore",
        "Write an earlier version's text as a knowledge item's newest version.",
        verb="knowledge.restore",
        params=(AGENT, KNOWLEDGE_ITEM, Param("version", "Version", "word")),
        done="{ref} restored to version {version}",
    ),
    Command(
        "knowledge link",
        "Link two knowledge items with a typed edge (relates_to, derived_from, supersedes);\n"
        "both must exist (exits 4 naming the missing one). Linking twice changes nothing.",
        verb="knowledge.link",
        params=(
            AGENT,
            KNOWLEDGE_ITEM,
            Param("edge", "Edge type", "word"),
            Param("target", "Target item (name, alias or id)", "item"),
        ),
        done="{ref} {edge} {target}",
    ),
    Command(
        "knowledge unlink",
        "Remove the edges from one knowledge item to another (--edge: only that type). Exits 4"
        "\nif there is none.",
        verb="knowledge.unlink",
        params=(
            AGENT,
            KNOWLEDGE_ITEM,
            Param("target", "Target item (name, alias or id)", "item"),
            Param("edge", "Edge type (empty: all)", "word", optional=True),
        ),
        done="edges from {ref} to {target} removed",
    ),
    Command(
        "knowledge delete",
        "Remove one knowledge item by name, alias or id, with its aliases and versions. Exits 4"
        "\nif there is none.",
        verb="knowledge.delete", params=(AGENT, KNOWLEDGE_ITEM),
        done="{ref} deleted from {agent_id}'s knowledge",
    ),
    Command(
        "memory reembed",
        "Re-embed an agent's memory (or every agent's: --all) with the configured embedding "
        "model.\n\n"
        "Run it after changing the embedding model or its dimensions: the old vectors go, "
        "the\nvector columns take the new size, and every session chunk, summary and knowledge "
        "item is\nembedded again, with a progress bar. Memory is searched by text meanwhile. "
        "Stopped midway,\nthe next run resumes. --missing only embeds the rows an embedding "
        "outage left without a\nvector. With --all, an agent that fails stops the run: the "
        "agents finished are listed,\nthen the error names the agent, those not started and "
        "the command that resumes (exit code\nthe failure's: 6 no embedder, 5 already running). "
        "choird stopping midway ends it the same\nway: the agents finished are listed, then "
        "the error says so and names the command (exit 6).",
        verb="memory.reembed",
        params=(Param("agent_id", "Agent (empty: --all)", "agent", optional=True),),
        streams=True,
    ),
    Command(
        "memory backfill-tools",
        "Tell every tool call of an agent's past sessions (or every agent's: --all) in one "
        "sentence.\n\n"
        "Sessions closed before tool-call rows existed get one row per call (\"ran `pytest -q` "
        "(exit 0)\"),\nsearchable by text and, while mid-term, by vector; with a progress bar. "
        "Idempotent: a\nsecond run stores nothing, a run cut short is completed by the next.",
        verb="memory.backfill_tools",
        params=(Param("agent_id", "Agent (empty: --all)", "agent", optional=True),),
        streams=True,
    ),
    # gateways
    Command(
        "gateway status",
        "Show the console DM and each Telegram bot: state, DMs, sends, last error.\n\n"
        "States: running, connecting, backing_off (the Bot API unreachable: retried),\n"
        "invalid_token (rejected or revoked: the bot stopped, choird runs on), no_token,\n"
        "starting, pending_restart (added by config apply). Also each bot's last update,\n"
        "its DMs and the agent each reaches, queued and failed sends. Never a token or a\n"
        "message's text. Exits 6 when choird is not running.",
        verb="gateway.status",
    ),
    Command(
        "usage",
        "Show LLM calls, tokens and cost per UTC day, model, agent or job, and each agent's\n"
        "spend against its caps.\n\n"
        "A cost is the provider's when it reports one, else from models.<name>.price; calls of "
        "a\nmodel with neither are counted as unknown cost, never as 0. Exits 4 naming an "
        "unknown\nagent or model.",
        verb="usage",
        params=(Param("agent_id", "Agent (empty: all)", "agent", optional=True),),
    ),
    # the recovery inbox (not the DMs' message inbox)
    Command(
        "inbox list",
        "List what waits for a human after a restart: held jobs, calls of unknown outcome, "
        "pending\nand timed-out approvals, failed updates — each with its choices and the "
        "command that\ndecides it. (The recovery inbox, not the DMs' messages.)",
        verb="inbox.list",
        params=(Param("agent_id", "Agent (empty: every agent)", "agent", optional=True),),
    ),
    Command(
        "inbox resolve",
        "Decide one recovery inbox item through the command that owns it (session recover, "
        "agent\nstart, approval approve/reject, agent update). Exits 5 if it was decided "
        "elsewhere.",
        verb="inbox.resolve",
        params=(Param("item_id", "Inbox item", "item"), Param("choice", "Choice", "word")),
    ),
    # the DM's own
    Command(
        "inject",
        "Inject a message into edge's context at its next safe point (§12.8).",
        DMS, params=(Param("text", "Instruction", "text"),), dm="inject",
        dm_help="inject an instruction into edge's context at its next safe point",
    ),
    Command("help", "List the commands this DM may run.", DMS, dm="help",
        dm_help="the commands this DM may run"),
)  # fmt: skip
"""The catalogue, grouped by noun."""

BY_NAME: Final[Mapping[str, Command]] = {command.name: command for command in CATALOGUE}


def command(name: str) -> Command:
    """The catalogued command `name` (KeyError naming it otherwise)."""
    return BY_NAME[name]


def help_of(name: str) -> str:
    """choirctl's help text of `name`."""
    return BY_NAME[name].help


def operator_commands() -> frozenset[str]:
    """Every command an operator runs: exactly choirctl's command tree."""
    return frozenset(c.name for c in CATALOGUE if "operator" in c.scopes)


def documented(name: str) -> Callable[[F], F]:
    """Give choirctl's command function its catalogued help (typer reads the docstring), so
    the help lives here once: `@app.command("stop")` over `@documented("agent stop")`."""

    def document(function: F) -> F:
        function.__doc__ = BY_NAME[name].help
        return function

    return document
