"""choird lets go of its home however its stop goes: a failure while stopping the agents still
closes the operator socket, the database and the instance lock, so the next choird starts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from choir.failpoints import FailpointPanic
from choir.home import ChoirHome
from tests.harness.daemons import running_daemon


async def test_a_failure_stopping_the_agents_still_releases_the_home(
    home: ChoirHome, armed: Callable[[str], None]
) -> None:
    armed("choird.before_stop_agents=panic")
    with pytest.raises(FailpointPanic):
        async with running_daemon(home):
            pass
    armed("")
    async with running_daemon(home) as daemon:  # the instance lock and the socket are free
        assert daemon.services is not None
