"""`choird` as the operator runs it: start-up errors, a clean start, a clean stop.

Each start-up error is one line on stderr (`choird: error: …`, besides choird's JSON log
records), a non-zero documented exit code and no traceback. A clean start reaches
"choird ready" within 3 s with its embedded Postgres, answers `choirctl status`, and SIGTERM
stops choird and its Postgres with exit 0.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from choir.daemon.app import POOL_IDLE_CLOSE_S
from choir.errors import ExitCode
from choir.home import ChoirHome
from tests.harness.homes import make_home, read_config, write_config
from tests.harness.processes import (
    Choird,
    run_choirctl,
    run_choird,
    spawn_choird,
    wait_until_ready,
)

READY_BUDGET_S = 3.0


def error_lines(stderr: str) -> list[str]:
    """stderr without choird's JSON log records: what the operator reads."""
    return [line for line in stderr.splitlines() if line.strip() and not _is_record(line)]


def _is_record(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def assert_one_error_line(run: subprocess.CompletedProcess[str], code: ExitCode) -> str:
    assert run.returncode == code, run.stderr
    assert "Traceback" not in run.stderr
    [line] = error_lines(run.stderr)
    assert line.startswith("choird: error: ")
    return line


def test_without_a_config_it_says_to_run_choirctl_init(root: Path) -> None:
    home = ChoirHome(root / "h")
    line = assert_one_error_line(run_choird(home), ExitCode.CONFIG)
    assert f"no config at {home.config_file}" in line
    assert "run `choirctl init` first" in line


@pytest.mark.parametrize(
    ("break_config", "named"),
    [
        (lambda data: data.update(bogus=True), "bogus: unknown key"),
        (lambda data: data.update(heartbeat_interval_ms=-5), "heartbeat_interval_ms"),
        (
            lambda data: data["agents"]["agent-1"]["defaults"].update(workspace="nowhere"),
            "nowhere",
        ),
    ],
    ids=["unknown-key", "negative-interval", "unknown-workspace"],
)
def test_an_invalid_config_names_the_problem(root: Path, break_config, named: str) -> None:
    home = make_home(root)
    data = read_config(home)
    break_config(data)
    write_config(home, data)
    line = assert_one_error_line(run_choird(home), ExitCode.CONFIG)
    assert "config.json has" in line
    assert named in line


def test_a_config_that_is_not_json_names_the_line(root: Path) -> None:
    home = make_home(root)
    home.config_file.write_text('{"agents": ,}\n')
    line = assert_one_error_line(run_choird(home, "--quiet"), ExitCode.CONFIG)
    assert "invalid JSON at line 1" in line


def test_an_unreachable_external_postgres_names_host_and_port(root: Path) -> None:
    port = _closed_port()
    postgres = {"host": "127.0.0.1", "port": port, "database": "choir", "secret": "pg"}
    home = make_home(root, postgres=postgres)
    line = assert_one_error_line(run_choird(home), ExitCode.UNAVAILABLE)
    assert f"127.0.0.1:{port}" in line
    assert "check postgres in config.json" in line
    assert not home.pgdata.exists()


def test_quiet_start_up_errors_are_exactly_one_line(root: Path) -> None:
    home = make_home(
        root,
        postgres={"host": "127.0.0.1", "port": _closed_port(), "database": "choir", "secret": "pg"},
    )
    run = run_choird(home, "--quiet")
    assert run.returncode == ExitCode.UNAVAILABLE
    assert run.stderr.count("\n") == 1
    assert run.stderr.startswith("choird: error: cannot connect to Postgres")


@pytest.mark.slow
@pytest.mark.serial  # holds a first start to its readiness budget
def test_a_clean_start_answers_status_and_sigterm_stops_everything(root: Path) -> None:
    home = make_home(root)
    choird = spawn_choird(home)
    try:
        ready_s = wait_until_ready(choird)
        assert ready_s < READY_BUDGET_S, f"choird ready after {ready_s:.2f} s (first start)"
        status = run_choirctl(home, "status", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["postgres"]["state"] == "ok"
        postmaster = _postmaster(home)
        assert postmaster.is_running()
    finally:
        code = _terminate(choird)
    assert code == 0, choird.stderr_text()
    assert "Traceback" not in choird.stderr_text()
    assert _gone(postmaster)
    assert not (home.pgdata / "postmaster.pid").exists()
    assert not home.operator_socket.exists()


@pytest.mark.slow
def test_an_idle_choird_keeps_one_connection_to_its_postgres(root: Path) -> None:
    """Each connection is a Postgres backend of ~14-19 MB resident: an idle choird keeps one
    (`POOL_MIN_SIZE`), not two; the pool opens more only while queries overlap, and closes them
    once idle."""
    home = make_home(root)
    choird = spawn_choird(home)
    try:
        wait_until_ready(choird)
        assert run_choirctl(home, "status", "--json").returncode == 0
        postmaster = _postmaster(home)

        def backends() -> list[str]:
            titles = [" ".join(child.cmdline()) for child in postmaster.children()]
            return [title for title in titles if "[local]" in title]

        # under load start-up's background queries can overlap `status`: the connection opened
        # for that closes once idle for POOL_IDLE_CLOSE_S
        deadline = time.monotonic() + POOL_IDLE_CLOSE_S + 10
        while len(backends()) > 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        left = backends()
    finally:
        _terminate(choird)
    assert len(left) == 1, left


@pytest.mark.slow
def test_a_second_choird_on_the_same_home_is_refused_and_harms_nothing(root: Path) -> None:
    home = make_home(root)
    first = spawn_choird(home, "--quiet")
    try:
        wait_until_ready(first)
        postmaster = _postmaster(home)
        line = assert_one_error_line(run_choird(home), ExitCode.CONFLICT)
        assert "choird is already running" in line
        assert str(home.root) in line
        assert f"pid {first.process.pid}" in line
        # The first choird, its Postgres and its socket are untouched.
        assert postmaster.is_running()
        status = run_choirctl(home, "status", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["postgres"]["state"] == "ok"
    finally:
        code = _terminate(first)
    assert code == 0, first.stderr_text()


@pytest.mark.slow
def test_two_choirds_started_at_the_same_instant_one_wins(root: Path) -> None:
    """Both would find no socket answering; the home's lock lets exactly one through."""
    home = make_home(root)
    racers = [spawn_choird(home, "--quiet") for _ in range(2)]
    try:
        deadline = time.monotonic() + 30
        while sum(r.process.poll() is None for r in racers) == 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        losers = [r for r in racers if r.process.poll() is not None]
        assert len(losers) == 1, [r.stderr_text() for r in racers]
        assert losers[0].process.returncode == ExitCode.CONFLICT
        assert "choird is already running" in losers[0].stderr_text()
        winner = next(r for r in racers if r is not losers[0])
        wait_until_ready(winner)
        status = run_choirctl(home, "status", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["postgres"]["state"] == "ok"
    finally:
        codes = [_terminate(r) for r in racers if r.process.poll() is None]
    assert codes == [0]


@pytest.mark.slow
def test_sigterm_during_start_up_still_stops_cleanly(root: Path) -> None:
    """A supervisor may signal at any moment; choird must not die half-started, leaving its
    Postgres running without it."""
    home = make_home(root)
    choird = spawn_choird(home)
    try:
        while "step 1-2" not in choird.stderr_text():
            assert choird.process.poll() is None, choird.stderr_text()
            time.sleep(0.005)
    finally:
        code = _terminate(choird)
    assert code == 0, choird.stderr_text()
    assert "choird stopped" in choird.stderr_text()
    assert not (home.pgdata / "postmaster.pid").exists()


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _postmaster(home: ChoirHome) -> psutil.Process:
    pid = int((home.pgdata / "postmaster.pid").read_text().splitlines()[0])
    return psutil.Process(pid)


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _terminate(choird: Choird) -> int:
    if choird.process.poll() is None:
        choird.process.send_signal(signal.SIGTERM)
    try:
        return choird.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        choird.process.kill()
        raise
