"""What a container that exited while choird was away said meanwhile, and why it gave up.

choird copies a container's output into the agent's log as it comes (`DockerRuntime._watch`);
while choird is down nobody does. A starting agent that waited out its patience for a restarted
choird (`choir.agent.start_retry`) then exits with its reason in output no one copied, and the
choird that comes back removes the exited container — its output with it — and could only say
"its agent no longer runs". So before an exited container is removed, what it wrote after the
last copied line (`log_resume`) is appended to the agent's log, and the start failure among
it, if any, is the crashed session's reason (`choir.logs.last_words`), as on the process runtime.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from choir.adapters.docker.containers import ContainerEngine
from choir.daemon.runtimes.log_resume import SkipCopied, resume_point
from choir.errors import ChoirError
from choir.home import ChoirHome
from choir.logs import get_logger
from choir.logs.handler import AppendSink
from choir.logs.last_words import start_failure

log = get_logger("choird.runtime")


async def last_words(
    engine: ContainerEngine, home: ChoirHome, container: str, agent_id: str, session_id: str
) -> str | None:
    """Copy the exited `container`'s uncopied output to `agent_id`'s log; the start failure of
    `session_id` it tells, if any (None too when the engine cannot say)."""
    log_file = home.agent_log(agent_id)
    try:
        inspect = await engine.inspect(container)
        started = _started_at(inspect)
        resume = resume_point(log_file)
        home.logs.mkdir(parents=True, exist_ok=True)
        with AppendSink(log_file) as appended:  # an exited container's output ends at once
            sink = SkipCopied(appended, resume.copied if resume else ())
            await engine.follow(container, sink, since=resume.since if resume else None)
            sink.finish()
    except (ChoirError, OSError) as error:
        log.warning(
            "cannot read what an exited agent container said",
            fields={"agent_id": agent_id, "id": container[:12], "error": str(error)},
        )
        return None
    if started is None:
        return None
    return await asyncio.to_thread(start_failure, log_file, session_id, started)


def _started_at(inspect: dict[str, object]) -> float | None:
    """When the container's process started (seconds since the epoch), from `State.StartedAt`."""
    state = inspect.get("State")
    text = state.get("StartedAt") if isinstance(state, dict) else None
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text).timestamp()  # nanoseconds: 3.11 keeps microseconds
    except ValueError:
        return None


__all__ = ["last_words"]
