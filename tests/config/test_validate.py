"""Whole-file validation: references, cross-field rules, warnings, duplicates, the hash."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from choir.config import config_hash, validate_config_data, validate_config_text

SPEC_EXAMPLE = Path(__file__).parent / "data" / "spec_example.json"
ALL_SECRETS = {
    "openrouter-key",
    "elevenlabs-key",
    "git-dev-token",
    "git-ops-token",
    "notion-personal-key",
    "notion-work-key",
    "email-primary-creds",
    "email-notify-creds",
    "brave-api-key",
    "tg-bot-main-token",
    "tg-bot-work-token",
    "postgres-admin-creds",
}


@pytest.fixture
def example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SPEC_EXAMPLE.read_text())
    return data


def _errors(data: dict[str, Any]) -> list[str]:
    return validate_config_data(data, ALL_SECRETS).errors


def test_spec_example_with_all_secrets_has_no_warnings(example: dict[str, Any]) -> None:
    report = validate_config_data(example, ALL_SECRETS)
    assert (report.errors, report.warnings) == ([], [])
    assert report.ok


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("workspace", "main", "unknown workspace 'main' (known: main-ws, scratch)"),
        ("llm", "sonet", "unknown model 'sonet' (known: gpt4o, o3, sonnet)"),
        ("voice_profile", "x", "unknown voice profile 'x' (known: default-en, narrator)"),
        ("git_identity", "x", "unknown git identity 'x' (known: dev-identity, ops-identity)"),
        ("notion", "x", "unknown Notion integration 'x' (known: personal-wiki, work-wiki)"),
        ("email", "x", "unknown email account 'x' (known: notifications, primary-email)"),
        ("dm", "x", "unknown DM 'x' (known: admin-dm, user-dm, work-dm)"),
    ],
)
def test_agent_default_references(
    example: dict[str, Any], key: str, value: str, problem: str
) -> None:
    example["agents"]["agent-1"]["defaults"][key] = value
    assert _errors(example) == [f"agents.agent-1.defaults.{key}: {problem}"]


def test_dm_and_voice_profile_references(example: dict[str, Any]) -> None:
    example["dms"]["user-dm"]["gateway"] = "bot-mian"
    example["voice_profiles"]["narrator"]["tts"] = "elven"
    assert _errors(example) == [
        "dms.user-dm.gateway: unknown gateway 'bot-mian' (known: bot-main, bot-work)",
        "voice_profiles.narrator.tts: unknown TTS provider 'elven' (known: eleven)",
    ]


def test_reference_into_an_empty_section(example: dict[str, Any]) -> None:
    example["notion_integrations"] = {}
    assert _errors(example) == [
        "agents.agent-1.defaults.notion: unknown Notion integration 'personal-wiki' (known: none)"
    ]


def test_references_are_checked_even_when_other_parts_are_invalid(example: dict[str, Any]) -> None:
    example["heartbeat_interval_ms"] = -1
    example["agents"]["agent-1"]["defaults"]["llm"] = "sonet"
    assert _errors(example) == [
        "heartbeat_interval_ms: Input should be greater than 0",
        "agents.agent-1.defaults.llm: unknown model 'sonet' (known: gpt4o, o3, sonnet)",
    ]


@pytest.mark.parametrize(
    ("heartbeat", "threshold", "ok"),
    [(5000, 10_000, True), (5000, 9_999, False), (1000, 2000, True), (1000, 50_000, True)],
)
def test_crash_threshold_is_at_least_two_heartbeats(
    example: dict[str, Any], heartbeat: int, threshold: int, ok: bool
) -> None:
    example["heartbeat_interval_ms"] = heartbeat
    example["crash_detection_threshold_ms"] = threshold
    expected = (
        []
        if ok
        else [
            f"crash_detection_threshold_ms: must be at least 2 x heartbeat_interval_ms "
            f"({2 * heartbeat}), got {threshold}"
        ]
    )
    assert _errors(example) == expected


def test_cross_field_rules(example: dict[str, Any]) -> None:
    example["models"]["sonnet"]["endpoint"] = None
    example["rpc"] = {"max_frame_bytes": 1000, "max_payload_bytes": 2000}
    example["dms"]["user-dm"]["user_id"] = "123456789"
    example["dms"]["work-dm"]["user_id"] = "@someone"
    assert _errors(example) == [
        "models.sonnet.endpoint: required for provider 'openrouter' (only 'scripted' needs none)",
        "rpc.max_payload_bytes: must not exceed rpc.max_frame_bytes (1000), got 2000",
        "dms.user-dm: same gateway and user_id as dms.admin-dm",
        "dms.work-dm.user_id: must be a numeric Telegram user id, got '@someone'",
    ]


def test_every_agents_approvals_only_on_an_admin_dm(example: dict[str, Any]) -> None:
    example["dms"]["admin-dm"]["approvals"] = "all"
    example["dms"]["work-dm"]["approvals"] = "bound"
    assert _errors(example) == []
    example["dms"]["user-dm"]["approvals"] = "all"
    assert _errors(example) == [
        'dms.user-dm.approvals: "all" is for admin DMs only; set "admin": true on dms.user-dm '
        'or use "approvals": "bound"'
    ]


@pytest.mark.parametrize(
    ("section", "name", "problem"),
    [
        ("models", "my model", "models.my model: invalid name 'my model': must match"),
        ("workspaces", "a.b", "workspaces.a.b: invalid name 'a.b': must match"),
        ("agents", "agent_ONE", "agents.agent_ONE: invalid agent id 'agent_ONE': must match"),
    ],
)
def test_names_must_match_the_safe_pattern(
    example: dict[str, Any], section: str, name: str, problem: str
) -> None:
    first = next(iter(example[section]))
    example[section][name] = copy.deepcopy(example[section][first])
    errors = _errors(example)
    assert len(errors) == 1
    assert errors[0].startswith(problem)


def test_placeholders_and_missing_secrets_are_warnings(example: dict[str, Any]) -> None:
    example["agents"]["agent-2"] = {
        "repo": {"url": "", "ref": "main"},
        "defaults": {
            "workspace": "",
            "llm": "sonnet",
            "voice_profile": "",
            "git_identity": "",
            "notion": "",
            "email": "",
            "dm": "",
        },
    }
    report = validate_config_data(example, ALL_SECRETS - {"openrouter-key"})
    assert report.errors == []
    assert report.warnings == [
        "agents.agent-2.repo.url: not set (set it before building the agent)",
        "agents.agent-2.defaults.workspace: not set (set it before starting the agent)",
        "agents.agent-2.defaults.git_identity: not set (set it before starting the agent)",
        "agents.agent-2.defaults.dm: not set (set it before starting the agent)",
        *(
            f"{path}: secret 'openrouter-key' is not set (choirctl secret set openrouter-key)"
            for path in ("models.sonnet.secret", "models.gpt4o.secret", "models.o3.secret")
        ),
        "embedding.secret: secret 'openrouter-key' is not set (choirctl secret set openrouter-key)",
    ]


def test_unknown_secrets_skip_secret_warnings(example: dict[str, Any]) -> None:
    assert validate_config_data(example, None).warnings == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"models": {"a": {}, "a": {}}}', "models: duplicate name 'a'"),
        ('{"global_repo": {"url": "/x", "url": "/y"}}', "global_repo: duplicate key 'url'"),
        ('{"rpc": {}, "rpc": {}}', "config.json: duplicate key 'rpc'"),
        ("[1, 2]", "config.json: must be a JSON object {...}"),
        (
            '{\n  "a": 1\n  "b": 2}',
            "config.json: invalid JSON at line 3, column 3: Expecting ',' delimiter",
        ),
    ],
)
def test_text_level_problems(text: str, problem: str) -> None:
    assert problem in validate_config_text(text, None).errors


def test_hash_ignores_formatting_and_spelled_out_defaults(example: dict[str, Any]) -> None:
    config = validate_config_data(example, None).config
    assert config is not None
    reordered = dict(reversed(list(example.items())))
    reordered["event_window_size"] = 50
    same = validate_config_text(json.dumps(reordered), None).config
    assert same is not None
    assert config_hash(same) == config_hash(config)
    example["models"]["sonnet"]["temperature"] = 0.6
    changed = validate_config_data(example, None).config
    assert changed is not None
    assert config_hash(changed) != config_hash(config)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"a": ' + "[" * 65 + "]" * 65 + "}", "[0]: nested more than 64 levels deep"),
        ('{"a": ' + "[" * 10_000 + "]" * 10_000 + "}", "config.json: nested more than 64 levels"),
        ('{"rpc": {"max_frame_bytes": 18446744073709551616}}', "rpc.max_frame_bytes: number out"),
        ('{"x": [1, -9223372036854775809]}', "x[1]: number out of range"),
        ('{"x": 1' + "0" * 5000 + "}", "x: number out of range"),
        ('{"x": -Infinity}', "x: number out of range"),
        ('{"x": 1e999}', "x: number out of range"),
    ],
    ids=["65-levels", "10000-levels", "2**64", "below-int64", "5000-digits", "infinity", "1e999"],
)
def test_what_no_reader_downstream_could_hold_is_one_problem(text: str, problem: str) -> None:
    [error] = validate_config_text(text, None).errors
    assert problem in error
