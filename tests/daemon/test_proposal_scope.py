"""What a proposal may change (issue 17): only its own agent's repo — a skill or tool proposal
from an agent whose repo is the global repo or another agent's too is refused when proposed,
in one line the model reads, and one approved before the repo became shared fails at its first
step with nothing written; and a user's (regular) DM, which answers only for its bound agent,
approves a config change only if it touches nothing but that agent's entry. Real Postgres,
real git."""

from __future__ import annotations

import pytest

from choir.config import load_home
from choir.config.scaffolding.gitrepo import git
from choir.daemon.agents.services import AgentServices
from choir.daemon.proposals.executor import ProposalApplier
from choir.daemon.staging.stage import ConfigStage
from choir.errors import ConflictError, UsageError
from choir.home import ChoirHome
from choir.protocol import RequestApprovalRequest
from choir.store.postgres.pool import Pool
from tests.daemon.conftest import read_config, write_config
from tests.daemon.test_proposal_executor import Edges
from tests.harness.proposals import SKILL, count_approvals

TOOL = RequestApprovalRequest(
    request_type="tool",
    payload={
        "manifest": {
            "llm": {
                "name": "notes.count",
                "description": "Count the notes.",
                "parameters": {"type": "object", "properties": {}},
            },
            "runtime": {
                "locks": [],
                "secret_resources": [],
                "side_effect": "none",
                "timeout_ms": 5000,
                "idempotent": True,
            },
        },
        "intended_behavior": "Print the number of files in notes/.",
        "rationale": "the user asks",
    },
)


def shared(home: ChoirHome, whose: str) -> ConfigStage:
    """agent-1's repo made the global repo (`whose` "global") or agent-2's ("agent-2")."""
    data = read_config(home)
    data["agents"]["agent-1"]["repo"] = dict(
        data["global_repo"] if whose == "global" else data["agents"]["agent-2"]["repo"]
    )
    write_config(home, data)
    return ConfigStage(load_home(home))


@pytest.mark.parametrize(
    ("whose", "why"),
    [
        ("global", "agent agent-1's repo is the global repo: a proposal would change every agent"),
        ("agent-2", "agent agent-1's repo is also agent agent-2's: a proposal would change both"),
    ],
)
async def test_a_skill_or_tool_for_a_shared_repo_is_refused_when_proposed(
    pool: Pool, home: ChoirHome, whose: str, why: str
) -> None:
    services = AgentServices.build(pool, shared(home, whose))
    started = await services.sessions.start("agent-1", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)

    for proposal in (SKILL, TOOL):
        with pytest.raises(UsageError) as refused:
            await services.approvals.request(ctx, proposal)
        message = refused.value.message
        assert message.startswith(f"this proposal could not be applied: {why}")
        assert message.endswith("give agent-1 a repo of its own (agents.agent-1.repo.url)")
        assert "\n" not in message
    assert await count_approvals(pool) == 0


async def test_one_approved_before_the_repo_became_shared_fails_at_its_first_step(
    pool: Pool, services: AgentServices, home: ChoirHome
) -> None:
    repo = home.sources / "agents" / "agent-1"
    before = git(repo, "rev-parse", "main").strip()
    started = await services.sessions.start("agent-1", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)
    asked = await services.approvals.request(ctx, SKILL)
    approved = await services.approvals.approve(asked.approval_id, by="choirctl")

    edges = Edges(shared(home, "global"))
    state = await ProposalApplier(pool, edges, lambda *_: None).run(approved.id)

    assert (state.step, state.failed_step) == ("failed", "commit")
    assert state.reason is not None
    assert "is the global repo: a proposal would change every agent" in state.reason
    assert edges.calls == ["commit"]
    assert git(repo, "rev-parse", "main").strip() == before
    assert git(repo, "branch", "--list", "proposal/*").strip() == ""


def config_change(patch: dict[str, object]) -> RequestApprovalRequest:
    return RequestApprovalRequest(
        request_type="config_change", payload={"patch": patch, "rationale": "tidier"}
    )


async def test_a_regular_dm_approves_a_config_change_only_of_its_own_agent(
    services: AgentServices,
) -> None:
    started = await services.sessions.start("agent-1", {})
    ctx = await services.sessions.authenticate(started.session_id, started.lease_token)
    own = await services.approvals.request(
        ctx, config_change({"agents": {"agent-1": {"repo": {"ref": "dev"}}}})
    )
    beyond = await services.approvals.request(ctx, config_change({"approval_timeout_ms": 600000}))
    other = await services.approvals.request(
        ctx, config_change({"agents": {"agent-2": {"repo": {"ref": "dev"}}}})
    )

    for asked in (beyond, other):
        with pytest.raises(ConflictError) as refused:
            await services.approvals.approve(asked.approval_id, by="console", agent_id="agent-1")
        assert refused.value.message == (
            f"approval {asked.approval_id} changes config.json beyond agents.agent-1: "
            "only an admin DM, choirctl or the console can approve it (reject drops it)"
        )
        assert (await services.approvals.show(asked.approval_id)).status == "pending"
    approved = await services.approvals.approve(own.approval_id, by="console", agent_id="agent-1")
    assert approved.status == "approved"
    admin = await services.approvals.approve(beyond.approval_id, by="choirctl")
    assert admin.status == "approved"
    rejected = await services.approvals.reject(other.approval_id, by="console", agent_id="agent-1")
    assert rejected.status == "rejected"
