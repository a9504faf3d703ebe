"""The command palette (ctrl+p): tabs, agent selection, and every view's `palette_commands()`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.views import VIEWS

if TYPE_CHECKING:
    from tui.app import ChoirApp

Entry = tuple[str, str, Callable[[], object]]


class ChoirCommands(Provider):
    """Everything the console can do, by name."""

    def entries(self) -> Iterator[Entry]:
        app = cast("ChoirApp", self.app)
        for view in VIEWS:
            yield (
                f"Show {view.title}",
                f"({view.key}) {view.description}",
                partial(app.action_show_tab, view.view_id),
            )
        for agent_id in app.state.agents:
            yield (
                f"Select agent {agent_id}",
                "per-agent views show it",
                partial(app.select_agent, agent_id),
            )
        for mounted in app.views.values():
            for command in mounted.palette_commands():
                yield command.title, command.help, command.run

    async def discover(self) -> Hits:
        for title, help_text, run in self.entries():
            yield DiscoveryHit(title, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, run in self.entries():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, help=help_text)
