"""What choird pushes to agents on its own initiative, wired once for every listener's hub.

Approval outcomes go back to the session that asked (§19.6) — an applied proposal's once its
apply ended; user messages an agent must be given
again after a resume come from the inbox; a session's push history is dropped when the session
ends. Operator-initiated pushes (cancel, compact, config and secret refresh) are
sent by the operator API where the operator acts.
"""

from __future__ import annotations

from collections.abc import Callable

from choir.daemon.agents.services import AgentServices
from choir.daemon.approvals import push_of
from choir.daemon.proposals.steps import APPLIED_KINDS
from choir.daemon.sessions.state import SessionEnded
from choir.protocol import UserMessagePush
from choir.store.approvals.pending import ApprovalRow
from choir.transport import PushHub


def wire_pushes(services: AgentServices, hub: PushHub) -> Callable[[], None]:
    """Connect the services' events to `hub`; returns the callable that disconnects them."""

    def approval_resolved(approval: ApprovalRow) -> None:
        applying = approval.status == "approved" and approval.outcome is None
        if applying and approval.request_type in APPLIED_KINDS:
            return  # its agent hears how the apply ended (applied or failed), not the decision,
            # or, for a tool, that phase 1 ended: approved, a human implements it (its outcome)
        if approval.session_id is not None:
            hub.push(approval.session_id, push_of(approval).model_dump(mode="json"))

    def session_ended(ended: SessionEnded) -> None:
        hub.close_session(ended.session_id)

    def user_message(session_id: str, push: UserMessagePush) -> None:
        hub.push(session_id, push.model_dump(mode="json"))

    unsubscribers = [
        services.approvals.subscribe(approval_resolved),
        services.sessions.subscribe(session_ended),
        services.inbox.subscribe(user_message),
    ]

    def disconnect() -> None:
        for unsubscribe in unsubscribers:
            unsubscribe()

    return disconnect
