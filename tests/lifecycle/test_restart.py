"""`agent restart` (§17.1): stop, then start the same session with the same bindings."""

from __future__ import annotations

import pytest

from choir.errors import ConflictError, NotFoundError, UnavailableError
from choir.store.sessions import SessionStatus
from tests.harness.daemons import leased, session_row, stored_events
from tests.harness.processes import gone
from tests.lifecycle.conftest import Choird
from tests.lifecycle.support import chat, choirctl, one_error_line

pytestmark = pytest.mark.slow


async def test_restart_resumes_the_same_session_with_the_start_bindings(choird: Choird) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console", "workspace": "other"})
    await chat(client, "hello")
    await client.model_set("agent-1", "demo-2")  # transient: a restart reverts it
    before = len(await stored_events(daemon, started.session_id))

    restarted = await client.agent_restart("agent-1")

    stopped = restarted.stopped
    assert stopped.model_dump(mode="json") == {
        "agent_id": "agent-1",
        "session_id": started.session_id,
        "status": "suspended",
        "exit_code": 0,
        "summary": stopped.summary.model_dump(mode="json"),
    }
    assert (stopped.summary.stored, stopped.summary.warn) == (True, False)
    assert (restarted.session_id, restarted.resumed) == (started.session_id, True)
    assert restarted.pid != started.pid
    assert gone(started.pid)
    assert restarted.bindings["workspace"] == "other"
    assert restarted.bindings["llm"] == "demo"
    assert (await chat(client, "hello"))["text"].startswith("Hello!")
    assert len(await stored_events(daemon, started.session_id)) > before
    row = await session_row(daemon, started.session_id)
    assert row.status == SessionStatus.ACTIVE
    await client.agent_stop("agent-1")
    assert await leased(daemon, started.session_id) == set()


async def test_restart_by_choirctl_and_its_refusals(choird: Choird) -> None:
    daemon, client = choird
    home = daemon.home
    not_running = one_error_line(await choirctl(home, "agent", "restart", "agent-1"), 5)
    unknown = one_error_line(await choirctl(home, "agent", "restart", "nope"), 4)
    started = await client.agent_start("agent-1", {"dm": "console"})
    done = await choirctl(home, "agent", "restart", "agent-1", "--json")

    assert not_running == (
        "error: agent-1 is not running: start it with choirctl agent start agent-1 --dm console"
    )
    assert unknown.startswith("error: no agent named 'nope'")
    assert "(known: agent-1, agent-2)" in unknown
    assert done.returncode == 0, done.stderr
    assert '"session_id": "' + started.session_id + '"' in done.stdout
    assert '"resumed": true' in done.stdout
    with pytest.raises(ConflictError, match="already running"):
        await client.agent_start("agent-1", {"dm": "console"})
    with pytest.raises(NotFoundError):
        await client.agent_restart("agent-9")
    await client.agent_stop("agent-1")


async def test_new_session_and_resume_choose_the_session(choird: Choird) -> None:
    _, client = choird
    first = await client.agent_start("agent-1", {"dm": "console"})
    await client.agent_stop("agent-1")  # stopped: the next start is a new session
    second = await client.agent_start("agent-1", {"dm": "console"})
    await client.agent_restart("agent-1")  # suspended: the next start would resume it
    await client.agent_stop("agent-1")
    resumed = await client.agent_start("agent-1", {"dm": "console"}, resume=first.session_id)
    await client.agent_stop("agent-1")
    fresh = await client.agent_start("agent-1", {"dm": "console"}, new_session=True)
    await client.agent_stop("agent-1")

    assert second.session_id != first.session_id
    assert (resumed.session_id, resumed.resumed) == (first.session_id, True)
    assert fresh.resumed is False
    assert fresh.session_id not in {first.session_id, second.session_id}


async def test_a_choird_inside_another_program_refuses_to_restart_in_place(choird: Choird) -> None:
    """This choird runs in the test's process (no `choird` command line to execute again): a
    `choird.restart` is refused before anything stops, and the agent runs on."""
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})

    with pytest.raises(UnavailableError) as refused:
        await client.choird_restart()

    assert refused.value.message == (
        "choird cannot restart in place: it runs inside another program, not as the choird "
        "command; nothing was stopped (choir down, then choir up, restarts it and its agents)"
    )
    assert not daemon.restarting
    status = await client.agent_status("agent-1")
    assert (status.state, status.session_id) == ("running", started.session_id)
    await chat(client, "hello")
