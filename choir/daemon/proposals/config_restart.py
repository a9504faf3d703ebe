"""What a config change needs restarted to take effect, and what the approver is told (pure).

Each change `config diff` classifies as `restart-required` names the command that puts it into
effect: `choirctl agent update <id>` / `agent update-all` (the agents that bind it: an agent
restart applies it), `choir restart` (a section choird reads once at start: it waits for
choird's next start, which `choir restart` makes in place, agents kept running — an approval
does not restart choird: the operator chooses when), or a start or stop by hand (an agent
added or removed: said, not done). Approving a change that needs an agent or choird restarted
is a choice the approver makes explicitly — choirctl's `approval approve <id> --restart`, the
console's approve and restart, a DM's `/approve <id> restart`, Telegram's Approve + restart
button —; without it the approval is refused and stays pending, the refusal naming the choice
in the words of the front end that asked (`CHOICE`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from choir.daemon.staging.diff import RESTART_CHOIRD

UPDATE_ONE: Final = "choirctl agent update "
UPDATE_ALL: Final = "choirctl agent update-all"
HOW_TO_RESTART_CHOIRD: Final = "choir restart"
CHOICE: Final = {
    "tui": "the console's approve and restart (R in the Approvals tab, or the palette's "
    '"Approval: approve and restart")',
    "console": "`/approve {id} restart`",
    "telegram": "the Approve + restart button or `/approve {id} restart`",
}
"""How each front end makes the restart choice, by `approvals.front_end`; choirctl's (and any
other's) is `CHOIRCTL`."""
CHOIRCTL: Final = "`choirctl approval approve {id} --restart`"


class Classified(Protocol):
    @property
    def path(self) -> str: ...
    @property
    def scope(self) -> str: ...
    @property
    def action(self) -> str: ...


@dataclass(frozen=True)
class RestartPlan:
    agents: tuple[str, ...] = ()
    """Agents to restart (those running), by the changes that name them."""
    every_agent: bool = False
    """A change every running agent picks up only by restarting (`agent update-all`)."""
    choird: tuple[str, ...] = ()
    """Paths that wait for choird's next start."""
    by_hand: tuple[str, ...] = ()
    """`path → command` for changes no restart applies (an agent added or removed): said in
    the outcome, never a reason to refuse a plain approval."""

    @property
    def needed(self) -> bool:
        return bool(self.agents or self.every_agent or self.choird)

    def refusal(self, approval_id: str, via: str = "choirctl") -> str:
        """One line: why approving `approval_id` plainly is refused, and the choice as the
        front end `via` makes it."""
        needs = []
        if self.agents or self.every_agent:
            who = "every running agent" if self.every_agent else ", ".join(self.agents)
            needs.append(f"a restart of {who}")
        if self.choird:
            needs.append(f"a choird restart ({', '.join(self.choird)})")
        return (
            f"approval {approval_id} takes effect only with {'; '.join(needs)}: approve it with "
            f"{CHOICE.get(via, CHOIRCTL).format(id=approval_id)} (choird restarts the agents; "
            f"its own changes wait for its next start: {HOW_TO_RESTART_CHOIRD}) or reject "
            "it; it stays pending"
        )


def restart_plan(changes: Iterable[Classified]) -> RestartPlan:
    agents: list[str] = []
    every, choird, by_hand = False, [], []
    for change in changes:
        if change.scope != "restart-required":
            continue
        if change.action == UPDATE_ALL:
            every = True
        elif change.action.startswith(UPDATE_ONE):
            agent = change.action.removeprefix(UPDATE_ONE)
            if agent not in agents:
                agents.append(agent)
        elif change.action == RESTART_CHOIRD:
            choird.append(change.path)
        elif not change.action.startswith("the next "):  # bound by a later start: nothing waits
            by_hand.append(f"{change.path} → {change.action}")
    return RestartPlan(tuple(agents), every, tuple(choird), tuple(by_hand))
