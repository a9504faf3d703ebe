"""A socket this user may not use: the console says so and how to fix it, and keeps trying.

Tests run as root, whom file modes do not stop, so the console runs in a forked child that
dropped to `nobody` first (everything it needs is imported before the fork).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from choir.home import ChoirHome
from tests.harness.homes import short_root
from tests.tui.pilot import until
from tui.app import ChoirApp
from tui.widgets.offline import OfflineScreen

NOBODY = 65534


@pytest.fixture
def home_of_root() -> Iterator[ChoirHome]:
    """A home whose operator socket listens, mode 0600, owned by root."""
    with short_root("td-") as root:
        root.chmod(0o755)
        home = ChoirHome(root / "h")
        home.socks.mkdir(parents=True)
        home.root.chmod(0o755)
        home.socks.chmod(0o755)
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(home.operator_socket))
        listener.listen()
        home.operator_socket.chmod(0o600)
        try:
            yield home
        finally:
            listener.close()


async def _what_nobody_sees(home: ChoirHome) -> tuple[str, str]:
    app = ChoirApp(home)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, OfflineScreen), within=10)
        return app.state.connection, str(app.screen.query_one("#offline-text").render())


def _as_nobody(home: ChoirHome, answers: multiprocessing.Queue[tuple[str, str]]) -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    answers.put(asyncio.run(_what_nobody_sees(home)))


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to become another user")
async def test_a_socket_of_another_user_says_permission_denied(home_of_root: ChoirHome):
    await _what_nobody_sees(ChoirHome(Path("/nonexistent-home")))  # import everything first
    context = multiprocessing.get_context("fork")
    answers: multiprocessing.Queue[tuple[str, str]] = context.Queue()
    child = context.Process(target=_as_nobody, args=(home_of_root, answers))
    child.start()
    try:
        connection, text = await asyncio.to_thread(answers.get, True, 30)
    finally:
        await asyncio.to_thread(child.join, 10)
    assert connection == "denied"
    assert "permission denied" in text
    assert str(home_of_root.operator_socket) in text
    assert "as the user running choird" in text
    assert stat.S_IMODE(home_of_root.operator_socket.stat().st_mode) == 0o600
