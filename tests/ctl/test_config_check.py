"""`choirctl config check`: every breakage gives its precise error, exit 3, and no changes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.ctl.cli import choirctl, snapshot

Edit = Callable[[dict[str, Any]], None]


def _set_temperature(config: dict[str, Any]) -> None:
    config["models"]["demo"]["temperature"] = "warm"


def _misspell_path(config: dict[str, Any]) -> None:
    workspace = config["workspaces"]["default"]
    workspace["pathh"] = workspace.pop("path")


def _dangling_llm(config: dict[str, Any]) -> None:
    config["models"]["o3"] = {"provider": "scripted", "model": "o3"}
    config["agents"]["agent-1"]["defaults"]["llm"] = "sonet"


def _bad_agent_id(config: dict[str, Any]) -> None:
    config["agents"]["Agent_1"] = config["agents"].pop("agent-1")


def _fast_crash(config: dict[str, Any]) -> None:
    config["crash_detection_threshold_ms"] = 8000


def _unknown_gateway_type(config: dict[str, Any]) -> None:
    config["gateways"]["console"]["type"] = "slack"


def _job_cards_word(config: dict[str, Any]) -> None:
    config["dms"]["console"]["job_cards"] = "sometimes"


BREAKAGES: list[tuple[str, Edit, list[str]]] = [
    (
        "wrong type",
        _set_temperature,
        ["models.demo.temperature: Input should be a valid number"],
    ),
    (
        "unknown key",
        _misspell_path,
        ["workspaces.default.path: required key missing", "workspaces.default.pathh: unknown key"],
    ),
    (
        "dangling reference",
        _dangling_llm,
        ["agents.agent-1.defaults.llm: unknown model 'sonet' (known: demo, o3)"],
    ),
    (
        "bad agent id",
        _bad_agent_id,
        ["agents.Agent_1: invalid agent id 'Agent_1': must match ^[a-z][a-z0-9_-]{0,30}$"],
    ),
    (
        "crash threshold",
        _fast_crash,
        [
            "crash_detection_threshold_ms: must be at least 2 x heartbeat_interval_ms (10000), "
            "got 8000"
        ],
    ),
    (
        "gateway type",
        _unknown_gateway_type,
        ["gateways.console.type: unknown gateway type 'slack' (known: console, telegram)"],
    ),
    (
        "job cards flag",
        _job_cards_word,
        ["dms.console.job_cards: Input should be a valid boolean"],
    ),
]


def _expect_problems(home: Path, text: str, problems: list[str]) -> None:
    (home / "config.json").write_text(text)
    before = snapshot(home)
    run = choirctl(home, "config", "check")
    assert run.code == 3
    header = f"error: config.json has {len(problems)} problem(s):"
    assert run.err.splitlines() == [header, *(f"  {p}" for p in problems)]
    assert run.out == ""
    assert snapshot(home) == before


@pytest.mark.parametrize(
    ("edit", "problems"), [b[1:] for b in BREAKAGES], ids=[b[0] for b in BREAKAGES]
)
def test_breakage_reports_precise_error(home: Path, edit: Edit, problems: list[str]) -> None:
    config = json.loads((home / "config.json").read_text())
    edit(config)
    _expect_problems(home, json.dumps(config, indent=2), problems)


def test_malformed_json_reports_line_and_column(home: Path) -> None:
    text = (home / "config.json").read_text()
    broken = text.replace('"ref": "main"\n  },', '"ref": "main"\n  }', 1)
    _expect_problems(
        home, broken, ["config.json: invalid JSON at line 6, column 3: Expecting ',' delimiter"]
    )


def test_duplicate_name_is_an_error(home: Path) -> None:
    text = (home / "config.json").read_text()
    duplicated = text.replace('"models": {', '"models": {\n    "demo": {"provider": "x"},', 1)
    _expect_problems(home, duplicated, ["models: duplicate name 'demo'"])


def test_every_problem_is_reported_at_once(home: Path) -> None:
    config = json.loads((home / "config.json").read_text())
    for edit, _ in (b[1:] for b in BREAKAGES[:3]):
        edit(config)
    (home / "config.json").write_text(json.dumps(config))
    run = choirctl(home, "config", "check", "--json")
    assert run.code == 3
    assert run.json()["errors"] == [
        "workspaces.default.path: required key missing",
        "workspaces.default.pathh: unknown key",
        "models.demo.temperature: Input should be a valid number",
        "agents.agent-1.defaults.llm: unknown model 'sonet' (known: demo, o3)",
    ]


def test_missing_secret_is_a_warning_not_an_error(home: Path) -> None:
    config = json.loads((home / "config.json").read_text())
    config["models"]["sonnet"] = {
        "provider": "openrouter",
        "model": "anthropic/claude-sonnet-4",
        "endpoint": "https://openrouter.ai/api/v1",
        "secret": "openrouter-key",
    }
    (home / "config.json").write_text(json.dumps(config))
    run = choirctl(home, "config", "check")
    assert run.code == 0
    assert run.err == (
        "warning: models.sonnet.secret: secret 'openrouter-key' is not set "
        "(choirctl secret set openrouter-key)\n"
    )
    assert run.out.startswith("config ok: 1 agent, 2 models")
    assert choirctl(home, "secret", "set", "openrouter-key", "k").code == 0
    assert choirctl(home, "config", "check").err == ""


def test_json_output_of_a_valid_config(home: Path) -> None:
    run = choirctl(home, "config", "check", "--json")
    assert run.code == 0
    report = run.json()
    assert report["ok"] is True
    assert report["counts"]["agents"] == 1
    assert report["postgres"] == "embedded"
    assert len(report["config_hash"]) == 64


def test_missing_config_says_to_run_init(tmp_path: Path) -> None:
    run = choirctl(tmp_path / "nothing", "config", "check")
    assert run.code == 4
    assert run.err == f"error: {tmp_path}/nothing/config.json does not exist: run choirctl init\n"


def test_world_readable_secrets_refused_with_chmod_hint(home: Path) -> None:
    secrets = home / "secrets.json"
    secrets.chmod(0o644)
    before = snapshot(home)
    run = choirctl(home, "config", "check")
    assert run.code == 3
    assert (
        f"  secrets.json is readable by group or others (mode 0644): run chmod 600 {secrets}"
        in run.err.splitlines()
    )
    assert snapshot(home) == before
