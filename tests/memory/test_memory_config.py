"""Memory configuration (§11.9, DESIGN-NOTES "Embedded defaults"): what `choirctl config check`
says about the embedding section, and which of its changes `config apply` carries (§16.1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from choir.config import ChoirConfig
from choir.daemon.staging.diff import config_changes
from choir.home import ChoirHome
from tests.ctl.cli import choirctl, snapshot
from tests.harness.homes import initialized


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    initialized(ChoirHome(root))
    return root


def write(home: Path, **top: Any) -> None:
    config = json.loads((home / "config.json").read_text())
    config.update(top)
    (home / "config.json").write_text(json.dumps(config, indent=2))


@pytest.mark.parametrize(
    ("embedding", "problems"),
    [
        (
            {"dimensions": 384},
            [
                "embedding.dimensions: the local model makes 256-dimension vectors, got 384; "
                "remove dimensions (or set another provider)"
            ],
        ),
        (
            {"provider": "local", "model": "all-MiniLM-L6-v2"},
            [
                "embedding.model: not used by the local provider; remove it, or set provider to "
                "an OpenAI-compatible one (openrouter, openai, or any with an endpoint)"
            ],
        ),
        (
            {"provider": "ollama", "model": "nomic-embed-text", "dimensions": 768},
            [
                "embedding.endpoint: required for provider 'ollama' (the base URL of its "
                "OpenAI-compatible API; only openai, openrouter have a default)"
            ],
        ),
        (
            {"provider": "openrouter"},
            [
                "embedding.secret: required for provider 'openrouter': name the secret holding "
                "its API key (choirctl secret set <name>)"
            ],
        ),
        (
            {"provider": "openai", "secret": "k", "dimensions": 3072},
            [
                "embedding.dimensions: at most 2000 (pgvector's HNSW index limit), got 3072; "
                "choose a smaller model or size"
            ],
        ),
        (
            {"provider": "openai", "secret": "k", "endpoint": "api.openai.com"},
            ["embedding.endpoint: must be an http:// or https:// URL"],
        ),
        (
            {"query_timeout_ms": 0},
            ["embedding.query_timeout_ms: Input should be greater than or equal to 10"],
        ),
    ],
    ids=[
        "local-dims",
        "local-model",
        "no-endpoint",
        "no-secret",
        "too-many-dims",
        "bad-url",
        "query-timeout",
    ],
)
def test_config_check_names_each_embedding_problem(
    home: Path, embedding: dict[str, Any], problems: list[str]
) -> None:
    write(home, embedding=embedding)
    before = snapshot(home)
    run = choirctl(home, "config", "check")
    assert run.code == 3
    errors = [line for line in run.err.splitlines() if not line.startswith("warning: ")]
    assert errors == [f"error: config.json has {len(problems)} problem(s):"] + [
        f"  {problem}" for problem in problems
    ]
    assert snapshot(home) == before


def test_a_chunk_cap_out_of_range_is_refused(home: Path) -> None:
    write(home, memory_chunk_chars=50)
    run = choirctl(home, "config", "check")
    assert run.code == 3
    assert "  memory_chunk_chars: Input should be greater than or equal to 200" in run.err


@pytest.mark.parametrize(
    "embedding",
    [
        None,  # what `choirctl init` writes: the local model
        {"provider": "local"},
        {"provider": "local", "dimensions": 256, "query_timeout_ms": 250},
        {"provider": "my-server", "endpoint": "http://127.0.0.1:8080/v1", "dimensions": 768},
    ],
    ids=["null", "local", "local-256", "keyless-server"],
)
def test_valid_embedding_sections(home: Path, embedding: dict[str, Any] | None) -> None:
    write(home, embedding=embedding, mid_term_sessions=3, memory_chunk_chars=1_500)
    run = choirctl(home, "config", "check", "--json")
    assert run.code == 0, run.err
    assert run.json()["warnings"] == []


def test_an_unset_key_is_a_warning(home: Path) -> None:
    write(home, embedding={"provider": "openrouter", "secret": "openrouter-key"})
    run = choirctl(home, "config", "check")
    assert run.code == 0
    assert run.err == (
        "warning: embedding.secret: secret 'openrouter-key' is not set "
        "(choirctl secret set openrouter-key)\n"
    )


def test_defaults_local_256_and_openai_compatible_1536() -> None:
    base = {"global_repo": {"url": "/r"}}
    local = ChoirConfig.model_validate(base).embedding
    assert (local.local, local.vector_dimensions, local.model_name, local.base_url) == (
        True,
        256,
        "local",
        None,
    )
    remote = ChoirConfig.model_validate(
        {**base, "embedding": {"provider": "openrouter", "secret": "k"}}
    ).embedding
    assert (remote.vector_dimensions, remote.model_name, remote.base_url) == (
        1536,
        "text-embedding-3-small",
        "https://openrouter.ai/api/v1",
    )
    assert ChoirConfig.model_validate(base).memory_chunk_chars == 2_000
    assert ChoirConfig.model_validate(base).mid_term_sessions == 10


def test_endpoint_key_and_timeouts_reload_the_model_needs_a_restart() -> None:
    base = {"global_repo": {"url": "/r"}}
    old = {"provider": "my-server", "endpoint": "http://a:1/v1", "dimensions": 8}
    new = {**old, "endpoint": "http://b:1/v1", "secret": "k", "timeout_s": 5.0}
    running = ChoirConfig.model_validate({**base, "embedding": old})
    hot = config_changes(running, ChoirConfig.model_validate({**base, "embedding": new}))
    assert {(c.path, c.scope, c.action) for c in hot} == {
        ("embedding.endpoint", "hot-reload", "choirctl config apply"),
        ("embedding.secret", "hot-reload", "choirctl config apply"),
        ("embedding.timeout_s", "hot-reload", "choirctl config apply"),
    }
    for field, value in (("model", "m2"), ("dimensions", 16), ("provider", "other")):
        staged = ChoirConfig.model_validate({**base, "embedding": {**old, field: value}})
        [change] = config_changes(running, staged)
        assert (change.path, change.scope, change.action) == (
            f"embedding.{field}",
            "restart-required",
            "choir restart",
        )
    tunables = ChoirConfig.model_validate({**base, "memory_chunk_chars": 900})
    [change] = config_changes(ChoirConfig.model_validate(base), tunables)
    assert (change.path, change.scope) == ("memory_chunk_chars", "hot-reload")
