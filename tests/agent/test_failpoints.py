"""Failpoints: parsing CHOIR_FAILPOINTS, inertness when unset, and each action for real."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from choir import failpoints
from choir.errors import UsageError
from choir.failpoints import (
    ENV_VAR,
    EXIT_CODE,
    Action,
    FailpointPanic,
    failpoint,
    failpoint_sync,
    parse_failpoints,
)


@pytest.fixture
def arm(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Arms failpoints for one test; the process-wide table is restored afterwards."""
    monkeypatch.setattr(failpoints, "_armed", None)
    monkeypatch.delenv(ENV_VAR, raising=False)

    def arm(spec: str) -> None:
        failpoints.arm_from_env({ENV_VAR: spec})

    return arm


def test_a_spec_arms_each_named_point() -> None:
    armed = parse_failpoints(
        " arbiter.after_append_before_ack=exit; heartbeat.after_send_before_ack=sleep(500);"
        "tool.after_intent_before_run=panic;"
    )
    assert dict(armed) == {
        "arbiter.after_append_before_ack": Action("exit"),
        "heartbeat.after_send_before_ack": Action("sleep", 500),
        "tool.after_intent_before_run": Action("panic"),
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("heartbeat.before_send", "bad entry 'heartbeat.before_send': expected name=action"),
        ("heartbeat.before_send=boom", "unknown action 'boom'"),
        ("heartbeat.before_send=sleep(soon)", "unknown action 'sleep(soon)'"),
        ("heartbeat.before_sned=panic", "unknown failpoint 'heartbeat.before_sned'"),
        ("tool.after_intent_before_run=panic;x=exit", "bad entry 'x=exit'"),
    ],
)
def test_a_bad_entry_is_named_in_a_one_line_error(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)) as caught:
        parse_failpoints(spec)
    assert caught.value.message.startswith(f"{ENV_VAR}: bad entry")
    assert "\n" not in caught.value.message


def test_arming_from_a_bad_environment_fails_at_start_up(arm: Callable[[str], None]) -> None:
    with pytest.raises(UsageError, match="unknown action 'crash'"):
        arm("tool.after_intent_before_run=crash")


async def test_unset_points_return_at_once(arm: Callable[[str], None]) -> None:
    assert failpoints.armed() == {}  # parsed lazily from the (empty) environment
    started = time.perf_counter()
    for _ in range(10_000):
        failpoint_sync("tool.after_intent_before_run")
        await failpoint("heartbeat.before_send")
    per_call = (time.perf_counter() - started) / 20_000
    assert per_call < 20e-6


async def test_panic_raises_through_exception_guards(arm: Callable[[str], None]) -> None:
    arm("tool.after_intent_before_run=panic")

    async def guarded() -> str:
        try:
            await failpoint("tool.after_intent_before_run")
        except Exception:  # a lane's guard must not absorb a simulated crash
            return "absorbed"
        return "passed"

    with pytest.raises(FailpointPanic, match=r"failpoint tool\.after_intent_before_run: panic"):
        await guarded()
    with pytest.raises(FailpointPanic):
        failpoint_sync("tool.after_intent_before_run")
    await failpoint("heartbeat.before_send")  # other points stay inert


async def test_sleep_pauses_the_caller_but_not_the_loop(arm: Callable[[str], None]) -> None:
    arm("heartbeat.after_send_before_ack=sleep(80)")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    started = time.monotonic()
    await failpoint("heartbeat.after_send_before_ack")
    elapsed = time.monotonic() - started
    task.cancel()

    assert elapsed >= 0.08
    assert ticks >= 3


def test_sleep_blocks_a_synchronous_caller(arm: Callable[[str], None]) -> None:
    arm("heartbeat.before_send=sleep(50)")
    started = time.monotonic()
    failpoint_sync("heartbeat.before_send")
    assert time.monotonic() - started >= 0.05


_SCRIPT = """
import asyncio, sys
from choir.failpoints import failpoint, failpoint_sync

async def main():
    print("before", flush=True)
    try:
        if sys.argv[1] == "async":
            await failpoint("arbiter.after_append_before_ack")
        else:
            failpoint_sync("arbiter.after_append_before_ack")
        print("after", flush=True)
    finally:
        print("finally", flush=True)

asyncio.run(main())
"""


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_exit_ends_the_process_at_once_with_137(mode: str) -> None:
    env = {**os.environ, ENV_VAR: "arbiter.after_append_before_ack=exit"}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode], env=env, capture_output=True, timeout=60, check=False
    )

    assert done.returncode == EXIT_CODE
    assert done.stdout == b"before\n"  # no `after`, and no `finally`: nothing ran past the point
    assert b"failpoint arbiter.after_append_before_ack: exit 137" in done.stderr


def test_the_same_script_runs_to_the_end_when_unarmed() -> None:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, "async"],
        env=env,
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == b"before\nafter\nfinally\n"
