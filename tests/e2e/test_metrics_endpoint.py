"""choird's metrics endpoint as an operator turns it on (issue 19, §22.1): off by default with
nothing listening, a Unix socket that serves the Prometheus format, and bad config refused in
one line — by `choirctl config check` and by choird's start (port already in use).

choird runs as its own process (`choird`) on the test's Postgres. The scrape of a live agent's
figures over a loopback port is `tests/e2e_agent/test_telemetry.py`.
"""

from __future__ import annotations

import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from choir.errors import ExitCode
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.e2e.test_choird_cli import _terminate, assert_one_error_line
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.processes import run_choirctl, run_choird, spawn_choird, wait_until_ready


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    return make_home(root, postgres=external_postgres(pg_params))


def with_metrics(home: ChoirHome, listen: str) -> None:
    data = read_config(home)
    data["metrics"] = {"listen": listen}
    write_config(home, data)


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something else already listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def listening(pid: int) -> list[str]:
    """The TCP addresses `pid` listens on."""
    connections = psutil.Process(pid).net_connections(kind="inet")
    return [f"{c.laddr.ip}:{c.laddr.port}" for c in connections if c.status == "LISTEN"]


def test_off_by_default_nothing_listens(home: ChoirHome) -> None:
    assert "metrics" not in read_config(home)
    choird = spawn_choird(home)
    try:
        wait_until_ready(choird)
        assert listening(choird.process.pid) == []
        assert not (home.root / "socks" / "metrics.sock").exists()
    finally:
        assert _terminate(choird) == 0, choird.stderr_text()
    assert "metrics endpoint" not in home.choird_log.read_text()


def test_a_unix_socket_serves_the_prometheus_format(home: ChoirHome) -> None:
    with_metrics(home, "unix:socks/metrics.sock")
    assert run_choirctl(home, "config", "check").returncode == 0
    choird = spawn_choird(home)
    path = home.root / "socks" / "metrics.sock"
    try:
        wait_until_ready(choird)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert listening(choird.process.pid) == []
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(path))) as http:
            answer = http.get("http://choird/metrics")
    finally:
        assert _terminate(choird) == 0, choird.stderr_text()
    assert answer.status_code == 200
    families = {family.name: family for family in text_string_to_metric_families(answer.text)}
    up = {s.labels["agent"]: s.value for s in families["choir_agent_up"].samples}
    assert up == dict.fromkeys(read_config(home)["agents"], 0)
    sessions = {s.labels["status"]: s.value for s in families["choir_sessions"].samples}
    assert sessions["active"] == 0
    assert set(sessions) == {"active", "stopped", "suspended", "crashed", "forked"}
    assert families["choir_approvals_pending"].samples[0].value == 0
    for name in ("choir_tool_calls", "choir_tool_call_duration_seconds", "choir_heartbeats"):
        assert families[name].samples == []  # declared, nothing counted yet
    assert families["process_resident_memory_bytes"].samples[0].value > 0
    assert not path.exists()  # removed when choird stops


def test_a_port_in_use_stops_the_start_in_one_line(home: ChoirHome, busy_port: int) -> None:
    with_metrics(home, f"127.0.0.1:{busy_port}")
    line = assert_one_error_line(run_choird(home), ExitCode.CONFIG)
    assert f"metrics.listen '127.0.0.1:{busy_port}': cannot listen" in line
    assert "already in use: stop what listens there or pick another port" in line
    assert not home.operator_socket.exists()


@pytest.mark.parametrize(
    ("listen", "problem"),
    [
        ("0.0.0.0:9464", "must be a loopback address"),
        ("10.1.2.3:9464", "must be a loopback address"),
        ("127.0.0.1:70000", "host:port with a port 1-65535"),
        ("localhost", "host:port with a port 1-65535"),
        ("unix:/run/metrics.sock", "a unix socket path relative to $CHOIR_HOME"),
    ],
)
def test_config_check_refuses_a_bad_listen_value(
    home: ChoirHome, listen: str, problem: str
) -> None:
    with_metrics(home, listen)
    checked = run_choirctl(home, "config", "check")
    assert checked.returncode == ExitCode.CONFIG, checked.stdout
    assert "Traceback" not in checked.stderr
    [named] = [line for line in checked.stderr.splitlines() if "metrics.listen" in line]
    assert problem in named
