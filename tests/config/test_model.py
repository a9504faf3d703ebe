"""The config.json model: the spec's example parses, defaults are the spec's, ranges hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from choir.config import (
    ChoirConfig,
    ConsoleGateway,
    EmbeddedPostgres,
    ExternalPostgres,
    TelegramGateway,
    Tunables,
    seeds_dir,
    validate_config_data,
)

SPEC_EXAMPLE = Path(__file__).parent / "data" / "spec_example.json"


def _minimal(**sections: Any) -> dict[str, Any]:
    return {"global_repo": {"url": "/srv/global"}, **sections}


def _errors(data: dict[str, Any]) -> list[str]:
    return validate_config_data(data, None).errors


@pytest.mark.parametrize("path", [SPEC_EXAMPLE, seeds_dir() / "config.example.json"])
def test_spec_example_is_valid(path: Path) -> None:
    report = validate_config_data(json.loads(path.read_text()), None)
    assert report.errors == []
    config = report.config
    assert config is not None
    assert config.models["o3"].temperature is None
    assert config.voice_profiles["narrator"].voice_settings.speed == 0.9
    assert isinstance(config.postgres, ExternalPostgres)
    assert config.postgres.port == 5432
    assert isinstance(config.gateways["bot-main"], TelegramGateway)
    assert config.agents["agent-1"].defaults.voice_profile == "default-en"


def test_tunable_defaults_are_the_spec_defaults() -> None:
    tunables = Tunables()
    assert tunables.heartbeat_interval_ms == 5000
    assert tunables.crash_detection_threshold_ms == 10_000
    assert tunables.rate_limit_retry_ms == 1000
    assert tunables.log_archive_threshold_lines == 100_000
    assert tunables.approval_timeout_ms == 30 * 60 * 1000
    assert tunables.event_window_size == 50
    assert tunables.mid_term_sessions == 10
    assert tunables.summary_timeout_ms == 30_000
    assert tunables.rpc.max_frame_bytes == 1_048_576


def test_minimal_config_gets_embedded_defaults() -> None:
    config = ChoirConfig.model_validate(_minimal())
    assert isinstance(config.postgres, EmbeddedPostgres)
    assert (config.embedding.local, config.embedding.vector_dimensions) == (True, 256)
    assert config.agents == {}


@pytest.mark.parametrize(
    ("postgres", "expected"),
    [
        ({"embedded": True}, EmbeddedPostgres),
        ({}, EmbeddedPostgres),
        ({"host": "db", "database": "choir", "secret": "pg"}, ExternalPostgres),
        ({"embedded": False, "host": "db", "database": "choir", "secret": "pg"}, ExternalPostgres),
    ],
)
def test_postgres_forms(postgres: dict[str, Any], expected: type[BaseModel]) -> None:
    config = ChoirConfig.model_validate(_minimal(postgres=postgres))
    assert type(config.postgres) is expected


@pytest.mark.parametrize(
    ("postgres", "problems"),
    [
        (
            {"embedded": False},
            [
                "postgres.host: required key missing",
                "postgres.database: required key missing",
                "postgres.secret: required key missing",
            ],
        ),
        ({"embedded": True, "host": "db"}, ["postgres.host: unknown key"]),
        (
            {"embedded": "yes"},
            ["postgres.embedded: unknown postgres mode 'yes' (known: false, true)"],
        ),
        (
            {"host": "db", "database": "c", "secret": "s", "port": 0},
            ["postgres.port: Input should be greater than or equal to 1"],
        ),
    ],
)
def test_postgres_problems(postgres: dict[str, Any], problems: list[str]) -> None:
    assert _errors(_minimal(postgres=postgres)) == problems


def test_gateways_are_discriminated_by_type() -> None:
    config = ChoirConfig.model_validate(
        _minimal(
            gateways={
                "tg": {"type": "telegram", "secret": "t", "base_url": "http://127.0.0.1:8081"},
                "console": {"type": "console"},
            }
        )
    )
    assert isinstance(config.gateways["tg"], TelegramGateway)
    assert config.gateways["tg"].base_url == "http://127.0.0.1:8081"
    assert isinstance(config.gateways["console"], ConsoleGateway)
    assert _errors(_minimal(gateways={"g": {"secret": "t"}})) == [
        "gateways.g.type: required key missing (one of: console, telegram)"
    ]
    assert _errors(_minimal(gateways={"g": {"type": "telegram"}})) == [
        "gateways.g.secret: required key missing"
    ]


VOICE = {"tts": {"el": {"model_id": "m", "secret": "k"}}}


@pytest.mark.parametrize(
    ("setting", "value", "problem"),
    [
        ("stability", 1.5, "Input should be less than or equal to 1"),
        ("similarity_boost", -0.1, "Input should be greater than or equal to 0"),
        ("style", 2, "Input should be less than or equal to 1"),
        ("speed", 0.4, "Input should be greater than or equal to 0.5"),
        ("speed", 2.5, "Input should be less than or equal to 2"),
        ("use_speaker_boost", "yes", "Input should be a valid boolean"),
    ],
)
def test_voice_setting_ranges(setting: str, value: Any, problem: str) -> None:
    profile = {"tts": "el", "voice_id": "v", "voice_settings": {setting: value}}
    data = _minimal(**VOICE, voice_profiles={"p": profile})
    assert _errors(data) == [f"voice_profiles.p.voice_settings.{setting}: {problem}"]


def test_voice_profile_defaults() -> None:
    data = _minimal(**VOICE, voice_profiles={"p": {"tts": "el", "voice_id": "v"}})
    profile = ChoirConfig.model_validate(data).voice_profiles["p"]
    assert profile.output_format == "mp3_44100_128"
    assert profile.voice_settings.speed == 1.0
    assert profile.voice_settings.use_speaker_boost is True


def test_model_defaults() -> None:
    data = _minimal(models={"m": {"provider": "scripted", "model": "demo"}})
    model = ChoirConfig.model_validate(data).models["m"]
    assert model.temperature == 0.7
    assert model.context_window_tokens == 128_000
    assert model.endpoint is None


def test_strictness_rejects_coercible_strings() -> None:
    assert _errors(_minimal(heartbeat_interval_ms="5000")) == [
        "heartbeat_interval_ms: Input should be a valid integer"
    ]


def test_workspace_path_must_be_absolute() -> None:
    assert _errors(_minimal(workspaces={"w": {"path": "relative/dir"}})) == [
        "workspaces.w.path: must be an absolute path"
    ]


def _undocumented(schema: dict[str, Any]) -> list[str]:
    missing = []
    for name, model in schema.get("$defs", {}).items():
        for field, spec in model.get("properties", {}).items():
            if "description" not in spec:
                missing.append(f"{name}.{field}")
    for field, spec in schema["properties"].items():
        if "description" not in spec:
            missing.append(f"ChoirConfig.{field}")
    return missing


def test_every_field_is_documented() -> None:
    assert _undocumented(ChoirConfig.model_json_schema()) == []
