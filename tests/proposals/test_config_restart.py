"""Which restarts a config change needs before a plain approval may apply it (pure)."""

from __future__ import annotations

from choir.daemon.proposals.config_restart import restart_plan
from choir.daemon.staging.diff import APPLY, RESTART_CHOIRD, ConfigChange


def change(path: str, action: str, scope: str = "restart-required") -> ConfigChange:
    return ConfigChange("~", "config.json", path, scope, action)  # type: ignore[arg-type]


def test_hot_changes_and_later_starts_need_no_restart() -> None:
    plan = restart_plan(
        [
            change("approval_timeout_ms", APPLY, "hot-reload"),
            change("workspaces.spare.path", "the next choirctl agent start that binds it"),
        ]
    )
    assert not plan.needed


def test_agents_choird_and_by_hand_changes_are_told_apart() -> None:
    plan = restart_plan(
        [
            change("git_identities.agent-1.name", "choirctl agent update agent-1"),
            change("agents.agent-1.repo.ref", "choirctl agent update agent-1"),
            change("rpc.read_timeout_ms", RESTART_CHOIRD),
            change("agents.agent-3", "choirctl agent start agent-3"),
        ]
    )
    assert plan.agents == ("agent-1",)
    assert plan.choird == ("rpc.read_timeout_ms",)
    assert plan.by_hand == ("agents.agent-3 → choirctl agent start agent-3",)
    said = plan.refusal("ap-1")
    assert said.startswith(
        "approval ap-1 takes effect only with a restart of agent-1; "
        "a choird restart (rpc.read_timeout_ms): approve it with "
        "`choirctl approval approve ap-1 --restart`"
    )
    assert said.endswith("or reject it; it stays pending")
    assert "\n" not in said


def test_an_update_all_restarts_every_running_agent() -> None:
    plan = restart_plan([change("global_repo.ref", "choirctl agent update-all")])
    assert (plan.needed, plan.every_agent) == (True, True)
    assert "a restart of every running agent" in plan.refusal("ap-2")


def test_the_refusal_names_the_restart_choice_of_the_front_end_that_asked() -> None:
    plan = restart_plan([change("git_identities.agent-1.name", "choirctl agent update agent-1")])
    assert "with `choirctl approval approve ap-3 --restart`" in plan.refusal("ap-3", "choirctl")
    assert "with `/approve ap-3 restart`" in plan.refusal("ap-3", "console")
    by_button = plan.refusal("ap-3", "telegram")
    assert "with the Approve + restart button or `/approve ap-3 restart`" in by_button
    assert "R in the Approvals tab" in plan.refusal("ap-3", "tui")
    assert "--restart" not in plan.refusal("ap-3", "tui")
