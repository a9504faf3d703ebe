"""The header line of choird's health, and the banner shown while the console is disconnected.

Both draw from `ConsoleState` only; the app calls `update_from(state)` whenever the status,
the agent listing or the connection changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from rich.text import Text
from textual.widgets import Static

from tui.state import ConsoleState

if TYPE_CHECKING:
    from choir.protocol.operator.answers import GatewayView
    from choir.protocol.operator.views import ProblemFields

_CONNECTION = {
    "connected": ("●", "connected", "health-ok"),
    "connecting": ("○", "connecting…", "health-warn"),
    "disconnected": ("○", "disconnected — retrying", "health-bad"),
    "not_running": ("○", "choird not running — retrying", "health-bad"),
    "denied": ("✕", "permission denied", "health-bad"),
}


class HealthBar(Static):
    """choird · Postgres · gateways · agents running · config version · approvals · agents down
    and held core jobs (only when there are some) · connection."""

    DEFAULT_CSS = """
    HealthBar { height: 1; padding: 0 1; }
    """

    def update_from(self, state: ConsoleState) -> None:
        self.update(health_text(state), layout=False)


def health_text(state: ConsoleState) -> Text:
    status = state.status
    dot, label, _ = _CONNECTION[state.connection]
    text = Text()
    text.append(f"{dot} ", style=_dot_style(state.connection))
    text.append("choird ", style="bold")
    text.append(status.version if status else "", style="dim")
    if state.connection != "connected":
        return text.append(f"  {label}", style="bold #e06c75")
    _field(text, "postgres", *_postgres(status.postgres if status else None))
    disk = status.disk if status else None
    if disk is not None and disk.state != "ok":
        _field(text, "disk", disk.state.replace("_", " "), "bold #e06c75")
    _field(text, "gateways", *_gateways(status.gateways if status else []))
    agents = f"{state.running_count()}/{len(state.agents)} running"
    _field(text, "agents", agents, "#56b6f7" if state.running_count() else "")
    version = f"v{state.config_version}" if state.config_version is not None else "?"
    if status and status.config_staged:
        version += " (staged)"
    _field(text, "config", version, "")
    pending = len(state.approvals)
    _field(text, "approvals", str(pending), "bold #e5c07b" if pending else "")
    down = state.interrupted()
    if down:  # an agent crashed: the Agents tab says why and how to bring it back (s)
        names = ", ".join(f"{outage.agent_id} {outage.status}" for outage in down)
        _field(text, "down", f"{names} — press s in Agents to resume", "bold #e06c75")
    held = len(state.held_jobs())
    if held:  # a core job waits for the operator after a crash (Agents/Cores say how to decide)
        _field(text, "held", f"{held} core job{'s' if held > 1 else ''}", "bold #e06c75")
    return text


def _field(text: Text, name: str, value: str, style: str) -> None:
    text.append("  │ ", style="dim")
    text.append(f"{name} ", style="dim")
    text.append(value, style=style)


def _postgres(postgres: ProblemFields | None) -> tuple[str, str]:
    if postgres is None:  # no `status` read yet
        return "?", "bold #e06c75"
    if postgres.state == "ok":
        latency = "" if postgres.latency_ms is None else postgres.latency_ms
        return f"ok {latency} ms", "#7ec16e"
    if postgres.problem == "restarting":
        return "restarting", "bold #e5c07b"
    return postgres.state, "bold #e06c75"


def _gateways(gateways: list[GatewayView]) -> tuple[str, str]:
    """`2/2 up`; with a gateway that is not up, the worst one named (`tg token rejected`)."""
    if not gateways:
        return "none", "dim"
    running = sum(gateway.state == "running" for gateway in gateways)
    text = f"{running}/{len(gateways)} up"
    down = sorted(
        (g for g in gateways if g.state != "running"),
        key=lambda g: _GATEWAY_TROUBLE.get(g.state, 1),
    )
    if not down:
        return text, "#7ec16e"
    worst = down[0]
    text += f" · {worst.name} {GATEWAY_WORDS.get(worst.state, worst.state)}"
    if len(down) > 1:
        text += f" +{len(down) - 1}"
    return text, "bold #e06c75" if worst.state in ("invalid_token", "no_token") else "#e5c07b"


_GATEWAY_TROUBLE = {"invalid_token": 0, "no_token": 0}
"""Which states the header names first (the operator must act), the rest after."""
GATEWAY_WORDS: Final = {
    "invalid_token": "token rejected",
    "no_token": "no token",
    "backing_off": "backing off",
    "pending_restart": "restart pending",
}
"""How a gateway's state reads in the header and the Gateways tab (the others as they are)."""


def _dot_style(connection: str) -> str:
    return {"connected": "bold #7ec16e", "connecting": "#e5c07b"}.get(connection, "bold #e06c75")


class ConnectionBanner(Static):
    """One line under the header while not connected: why, and that it retries by itself."""

    DEFAULT_CSS = """
    ConnectionBanner { height: 1; padding: 0 1; display: none; }
    ConnectionBanner.shown { display: block; }
    """

    def update_from(self, state: ConsoleState) -> None:
        shown = state.connection in ("disconnected", "not_running", "denied")
        self.set_class(shown, "shown")
        if shown:
            self.update(f"disconnected — retrying: {state.connection_detail}", layout=False)
