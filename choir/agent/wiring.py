"""The deterministic kernel of choir-agent: log, locks, tools, skills and the arbiter, wired.

The kernel (`choir.agent.kernel`) owns the tool and intent contracts and imports no tool; this
module hands it the in-container implementations (`BUILTIN_TOOLS`, `run_external`). Everything
here runs without a model (§3 "the LLM proposes, the control plane decides"). The
runtime (lanes, LLM client, replication) is built on one `Kernel`; tests and benchmarks build
the same thing against a `/choir`-like tree and a scratch workspace.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from choir.agent.kernel.arbiter import Arbiter
from choir.agent.kernel.commitlog import CommitLog
from choir.agent.kernel.dispatch import Dispatcher, HostBridge, LaneHook, SecretsView
from choir.agent.kernel.intents import IntentSink
from choir.agent.kernel.locks import LockManager
from choir.agent.kernel.registry import ToolRegistry
from choir.agent.kernel.workspace import Workspace
from choir.agent.tools.builtin import BUILTIN_TOOLS
from choir.agent.tools.external import run_external
from choir.core.budgets import BudgetLimits
from choir.core.skills.registry import SkillRegistry, load_skills
from choir.core.skills.runner import CONTROL_TOOLS


@dataclass(frozen=True)
class Kernel:
    """One session's kernel; `arbiter` is the only writer of `log`."""

    log: CommitLog
    locks: LockManager
    registry: ToolRegistry
    skills: SkillRegistry
    workspace: Workspace
    dispatcher: Dispatcher
    arbiter: Arbiter


@asynccontextmanager
async def open_kernel(
    root: Path,
    workspace_root: Path,
    *,
    limits: BudgetLimits,
    lane_hooks: Mapping[str, LaneHook] | None = None,
    runtime_tools: Collection[str] = (),
    unavailable: Collection[str] = (),
    host: HostBridge | None = None,
    secrets: SecretsView = dict,
    log: CommitLog | None = None,
    intent_sink: IntentSink | None = None,
) -> AsyncIterator[Kernel]:
    """Load tools and skills from `root` (fail fast, §8.8), open the workspace, run the arbiter.

    `lane_hooks` implement tools whose work belongs to a lane (choir.core.*, compaction…);
    `runtime_tools` names further built-in manifests the caller implements elsewhere;
    `unavailable` those no code implements yet (never offered to a lane).
    """
    hooks = dict(lane_hooks or {})
    registry = ToolRegistry.load(
        root,
        BUILTIN_TOOLS,
        runtime_tools=frozenset(runtime_tools) | hooks.keys(),
        unavailable=unavailable,
    )
    skills = load_skills(root / "skills", known_tools=[*registry.names(), *CONTROL_TOOLS])
    with Workspace(workspace_root) as workspace:
        workspace.ensure_choirtmp()
        dispatcher = Dispatcher(
            registry=registry,
            workspace=workspace,
            external=run_external,
            secrets=secrets,
            host=host,
            lane_hooks=hooks,
        )
        locks = LockManager()
        commit_log = log if log is not None else CommitLog()
        arbiter = Arbiter(
            log=commit_log,
            registry=registry,
            locks=locks,
            workspace=workspace,
            dispatcher=dispatcher,
            limits=limits,
            skills=skills,
            intent_sink=intent_sink,
        )
        runner = asyncio.create_task(arbiter.run(), name="arbiter")
        try:
            yield Kernel(commit_log, locks, registry, skills, workspace, dispatcher, arbiter)
        finally:
            arbiter.stop()
            await runner
