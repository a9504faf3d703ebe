"""choir-agent's start-up pieces (§13.2, §14.2): who it is, what it runs, where it resumes.

INIT_HELLO carries the image version and the manifest hashes from `<root>/version.json`; the
process runtime has no image, so without that file they are computed from the tools and skills
actually loaded (the same functions the image builder uses). With version.json at hand, INIT_HELLO
goes out before pydantic and the wire models load (`say_hello`: plain JSON, which choird
validates in full as `InitHelloRequest`); its answer is parsed once they have. A resumed
session's log is rebuilt from choird's snapshot boundary and tail, its chain verified before
anything is committed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from choir.agent.replication.link import ReconnectingClient
from choir.core.integrations import INTEGRATION_TOOLS, NOT_IN_THIS_VERSION
from choir.errors import UsageError
from choir.protocol.revision import PROTOCOL_VERSION

if TYPE_CHECKING:  # the wire models, kernel, tools and skills load after INIT_HELLO (`app`)
    from choir.agent.kernel.commitlog import CommitLog
    from choir.agent.start_retry import StartPatience
    from choir.protocol import InitHelloResponse
    from choir.transport import Client

INIT_HELLO: Final = "INIT_HELLO"
"""`Verb.INIT_HELLO` as it goes on the wire: the verbs' module loads every wire model."""
PROCESS_IMAGE: Final = "process"
"""`image_version` of an agent run as a plain process (no image, no version.json)."""

LANE_TOOLS: Final = frozenset(
    {
        "choir.core.spawn",
        "choir.core.inject",
        "choir.core.cancel",
        "choir.core.list",
        "choir.core.report",
        "choir.memory.compact",
        "choir.memory.query",
    }
)
"""Tools the lanes implement (lane hooks)."""


def runtime_tools() -> frozenset[str]:
    """What `open_kernel` must accept as implemented elsewhere."""
    from choir.agent.tools.builtin import BUILTIN_TOOLS

    return (LANE_TOOLS | INTEGRATION_TOOLS) - BUILTIN_TOOLS.keys()


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """How this agent process was started."""

    target: str | Path
    """choird's agent socket path, or its https URL."""
    root: Path
    """The `/choir` tree: tools, skills, identity files, version.json."""
    workspace: Path
    """The workspace the tools work in."""
    agent_id: str
    session_id: str
    lease_token: str = field(repr=False)
    """Never logged."""
    ca_file: Path | None = None
    """Certificate an https choird is verified against."""

    @classmethod
    def from_env(
        cls,
        target: str | Path,
        *,
        root: Path,
        workspace: Path,
        ca_file: Path | None = None,
        environ: Mapping[str, str] = os.environ,
        lease_token: str | None = None,
    ) -> AgentOptions:
        """Identity from `environ`; the lease token from there too unless given (choird's
        runtimes pass it on stdin, so it is in no process's environment, §14.1)."""
        names = ("CHOIR_AGENT_ID", "CHOIR_SESSION_ID", "CHOIR_LEASE_TOKEN")
        if lease_token:
            environ = {**environ, "CHOIR_LEASE_TOKEN": lease_token}
        missing = [name for name in names if not environ.get(name)]
        if missing:
            raise UsageError(
                f"choir-agent needs {', '.join(missing)} in its environment; choird sets them "
                "when it starts the agent"
            )
        return cls(
            target,
            root,
            workspace,
            environ["CHOIR_AGENT_ID"],
            environ["CHOIR_SESSION_ID"],
            environ["CHOIR_LEASE_TOKEN"],
            ca_file,
        )


async def open_client(options: AgentOptions) -> Client:
    """The control-plane client: reconnecting after a lost channel, verified TLS over https. Each
    connection is tried once: a choird that refuses the first one is waited for by the start's
    `StartPatience`, within the start's one budget (`START_PATIENCE_S`)."""
    return ReconnectingClient(
        options.target,
        session_id=options.session_id,
        lease_token=options.lease_token,
        ca_file=options.ca_file,
        connect_patience_s=0.0,
    )


async def say_hello(client: Client, options: AgentOptions, patience: StartPatience) -> Any:
    """INIT_HELLO sent — again while choird is away (`patience`): its side only reads, so a hello
    whose answer was lost is simply said again (`choir.agent.start_retry`); choird's answer as it
    came (`InitHelloResponse` once parsed)."""
    payload = hello_payload(options)
    return await patience.run(lambda: client.call(INIT_HELLO, payload), "saying hello")


def hello_payload(options: AgentOptions) -> dict[str, Any]:
    """INIT_HELLO's request in its wire form (`InitHelloRequest`), made without pydantic: choird
    validates it in full, and refuses an image or session it does not expect."""
    image, tools_hash, skills_hash = manifest_hashes(options.root)
    return {
        "protocol_version": PROTOCOL_VERSION,
        "agent_id": options.agent_id,
        "session_id": options.session_id,
        "image_version": image,
        "tool_manifest_hash": tools_hash,
        "skill_manifest_hash": skills_hash,
    }


VERSION_FIELDS: Final = ("image_version", "tool_manifest_hash", "skill_manifest_hash")
"""What INIT_HELLO takes from version.json (`VersionInfo`)."""


def manifest_hashes(root: Path) -> tuple[str, str, str]:
    """(image_version, tool_manifest_hash, skill_manifest_hash) of what this agent runs: from
    version.json when there is one (an image, or the process runtime's merged tree) — the tool
    registry and the skills load only after INIT_HELLO then."""
    version_file = root / "version.json"
    if version_file.is_file():
        return _version_fields(version_file)
    from choir.agent.kernel.registry import ToolRegistry
    from choir.agent.tools.builtin import BUILTIN_TOOLS
    from choir.core.skills.registry import load_skills
    from choir.core.skills.runner import CONTROL_TOOLS
    from choir.protocol import skill_manifest_hash

    registry = ToolRegistry.load(
        root, BUILTIN_TOOLS, runtime_tools=runtime_tools(), unavailable=NOT_IN_THIS_VERSION
    )
    skills = load_skills(root / "skills", known_tools=[*registry.names(), *CONTROL_TOOLS])
    return PROCESS_IMAGE, registry.manifest_hash(), skill_manifest_hash(skills.values())


def _version_fields(path: Path) -> tuple[str, str, str]:
    """`VERSION_FIELDS` of version.json; UsageError when it is not what choir writes there
    (choird checks the values themselves at INIT_HELLO)."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        raise UsageError(f"{path}: unreadable ({error}); rebuild the agent") from None
    values = [data.get(name) for name in VERSION_FIELDS] if isinstance(data, dict) else []
    strings = [value for value in values if isinstance(value, str)]
    if len(strings) != len(VERSION_FIELDS):
        raise UsageError(
            f"{path}: not a version.json choir wrote (it needs {', '.join(VERSION_FIELDS)} as "
            "strings); rebuild the agent"
        )
    image, tools, skills = strings
    return image, tools, skills


def restored_log(answer: InitHelloResponse) -> CommitLog:
    """A fresh log, or the resumed session's: snapshot boundary plus tail, chain verified."""
    from choir.agent.kernel.commitlog import CommitLog, LogEntry
    from choir.protocol import GENESIS_HASH, format_ts
    from choir.protocol.log.committed import event_json

    if answer.status == "fresh":
        return CommitLog()
    snapshot = answer.snapshot
    base_rev, base_hash = (snapshot.rev, snapshot.hash) if snapshot else (0, GENESIS_HASH)
    entries = [
        LogEntry(
            e.rev,
            e.lane,
            format_ts(e.ts),
            e.hash_prev,
            e.hash,
            event_json(e.event),
            e.artifact.model_dump(mode="json") if e.artifact is not None else None,
        )
        for e in answer.tail_events
    ]
    return CommitLog.restore(entries, base_rev=base_rev, base_hash=base_hash)
