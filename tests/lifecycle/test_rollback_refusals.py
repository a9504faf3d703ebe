"""`agent rollback` refuses before it changes anything: an unknown agent, the process runtime
(it runs the repos' trees, not images), a `--to` that is not a name — one line, non-zero exit."""

from __future__ import annotations

import pytest

from tests.lifecycle.conftest import Choird
from tests.lifecycle.support import chat, choirctl, one_error_line

pytestmark = pytest.mark.slow


async def test_rollback_refuses_bad_input_and_the_process_runtime(choird: Choird) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})

    unknown = await choirctl(daemon.home, "agent", "rollback", "nobody")
    on_process = await choirctl(daemon.home, "agent", "rollback", "agent-1")
    as_json = await choirctl(daemon.home, "agent", "rollback", "agent-1", "--json")

    assert "no agent named 'nobody'" in one_error_line(unknown, 4)
    line = one_error_line(on_process, 2)
    assert "the process runtime runs the repos' trees, not images" in line
    assert "choirctl agent update agent-1" in line
    assert one_error_line(as_json, 2) == line
    assert as_json.stdout == ""
    status = await client.agent_status("agent-1")
    assert (status.state, status.pid, status.session_id) == (
        "running",
        started.pid,
        started.session_id,
    )
    assert not (daemon.home.root / "runtime" / "agent-1" / "pinned-image").exists()
    assert (await chat(client, "hello"))["text"].startswith("Hello!")
    await client.agent_stop("agent-1")
