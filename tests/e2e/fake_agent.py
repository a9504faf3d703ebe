"""A stand-in for choir-agent in its own process: INIT_HELLO, then a heartbeat every interval.

    CHOIR_CONTROL_PLANE=<socket path or https URL> CHOIR_SESSION_ID=… CHOIR_LEASE_TOKEN=… \\
        python -m tests.e2e.fake_agent [--events-per-beat N]

Like a container, it gets its session and lease token from the environment (§12.4), talks to
choird only through the agent's `ControlPlane`, and keeps its own `CommitLog`. It prints `ready`
once choird has answered INIT_HELLO and `ack <rev>` after each acknowledged heartbeat. SIGTERM
ends it gracefully (TERMINATE_SELF, exit 0); SIGKILL is how a test simulates a crash.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
from pathlib import Path

from choir.agent.kernel.commitlog import CommitLog
from choir.agent.replication.control_plane import ControlPlane
from choir.protocol import TerminateSelfRequest
from tests.e2e.agent_side import commit_messages, heartbeat, hello, open_control_plane


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fake_agent", description=__doc__)
    parser.add_argument("--events-per-beat", type=int, default=1, help="events committed per beat")
    return parser


async def _beat(control_plane: ControlPlane, stop: asyncio.Event, per_beat: int) -> None:
    interval = int(os.environ.get("CHOIR_HEARTBEAT_INTERVAL_MS", "5000")) / 1000
    log, ack_rev, config_version = CommitLog(), 0, 1
    while not stop.is_set():
        commit_messages(log, per_beat, text="tick")
        reply = await control_plane.heartbeat(heartbeat(log, ack_rev, config_version))
        ack_rev = reply.ack_rev
        print(f"ack {ack_rev}", flush=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)


async def run(per_beat: int) -> None:
    session_id = os.environ["CHOIR_SESSION_ID"]
    ca_file = os.environ.get("CHOIR_CA_FILE")
    control_plane = await open_control_plane(
        os.environ["CHOIR_CONTROL_PLANE"],
        session_id,
        os.environ["CHOIR_LEASE_TOKEN"],
        Path(ca_file) if ca_file else None,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        await control_plane.init_hello(hello(os.environ["CHOIR_AGENT_ID"], session_id))
        print("ready", flush=True)
        await _beat(control_plane, stop, per_beat)
        await control_plane.terminate_self(TerminateSelfRequest(reason="SIGTERM"))
    finally:
        await control_plane.close()


def main() -> None:
    args = _parser().parse_args()
    asyncio.run(run(args.events_per_beat))


if __name__ == "__main__":
    main()
