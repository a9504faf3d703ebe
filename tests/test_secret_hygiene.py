"""A planted secret never appears in any log line, error message or output of a whole session.

Drives the real `choirctl` and a real `choird` (embedded Postgres) through set-up, validation,
failures and two-phase config with a secret referenced by the config, then greps everything they
printed and every log file (archives included) for the secret's value.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PLANTED = "sk-PLANTED-7f3a9c1e5d2b"
BIN = Path(sys.executable).parent


def run(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "choirctl"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "CHOIR_HOME": str(home)},
        timeout=60,
        check=False,
    )


def everything_logged(home: Path) -> str:
    texts = []
    for path in (home / "logs").rglob("*"):
        if path.suffix == ".gz":
            texts.append(gzip.decompress(path.read_bytes()).decode(errors="replace"))
        elif path.is_file():
            texts.append(path.read_text(errors="replace"))
    return "\n".join(texts)


@pytest.mark.slow
def test_a_planted_secret_is_never_printed_or_logged(tmp_path: Path) -> None:
    home = tmp_path / "home"
    outputs: list[str] = []

    def step(*args: str, stdin: str | None = None, ok: bool = True) -> None:
        done = run(home, *args, stdin=stdin)
        outputs.extend([done.stdout, done.stderr])
        assert (done.returncode == 0) == ok, (args, done.stderr)

    step("init")
    step("secret", "set", "openrouter-key", stdin=PLANTED + "\n")
    config = json.loads((home / "config.json").read_text())
    config["models"]["sonnet"] = {
        "provider": "openrouter",
        "model": "anthropic/claude-sonnet-4",
        "endpoint": "http://127.0.0.1:9/v1",
        "secret": "openrouter-key",
    }
    config["agents"]["agent-1"]["defaults"]["llm"] = "sonnet"
    (home / "config.json").write_text(json.dumps(config, indent=2))
    step("config", "check")
    step("secret", "list")
    step("secret", "list", "--json")
    step("secret", "set", "bad name!", PLANTED, ok=False)

    daemon = subprocess.Popen(
        [str(BIN / "choird")],
        env={**os.environ, "CHOIR_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not (home / "socks" / "choird.sock").exists():
            assert daemon.poll() is None, daemon.stderr.read() if daemon.stderr else ""
            assert time.monotonic() < deadline, "choird did not come up"
            time.sleep(0.05)
        step("status")
        step("config", "load")
        step("config", "diff")
        step("secret", "apply")
        step("config", "show", "--json")
        step("logs", "choird", "--no-follow")
    finally:
        daemon.send_signal(signal.SIGTERM)
        out, err = daemon.communicate(timeout=30)
        outputs.extend([out, err])
    assert daemon.returncode == 0, err

    secrets = home / "secrets.json"
    secrets.write_text(secrets.read_text()[:-3])  # malformed: the error must not quote it
    step("config", "check", ok=False)

    assert PLANTED not in "\n".join(outputs)
    assert PLANTED not in everything_logged(home)
    assert "choird ready" in everything_logged(home)
