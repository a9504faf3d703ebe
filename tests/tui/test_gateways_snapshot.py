"""The Gateways tab as a picture: a console DM, a bot whose token was revoked (red), the bot's
DMs with the agent one of them reaches, and a gateway `config apply` added."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from choir.protocol.operator.answers import GatewayStatus
from tests.tui.sample import sample_app
from tests.tui.test_actions_snapshots import SIZE, showing
from tui.app import ChoirApp
from tui.views.gateways import GatewaysView

GOLDEN = Path(__file__).parents[1] / "protocol" / "golden" / "v1" / "operator.json"


def with_gateways(app: ChoirApp) -> None:
    """The golden `gateway.status` answer with a revoked token, the bot highlighted."""
    answers = json.loads(GOLDEN.read_text())["gateway.status"]["answers"]
    revoked = answers[1]
    revoked["gateways"][1]["dms"][1].update(agent_id="agent-1", session_id="s-6a66e9e6c3572a58")
    view = app.query_one(GatewaysView)
    view.answer = GatewayStatus.model_validate(revoked)
    view.redraw()
    view.table.move_cursor(row=1)


def test_gateways_snapshot(snap_compare: Any) -> None:
    run_before = showing("gateways", with_gateways)
    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=run_before)
