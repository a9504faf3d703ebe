from __future__ import annotations

import pytest

from choir.store.postgres.idents import agent_role, agent_schema, quote_ident


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("choir_main", '"choir_main"'),
        ("choir_my-agent", '"choir_my-agent"'),
        ('we"ird', '"we""ird"'),
        ('"', '""""'),
        ("Mixed Case", '"Mixed Case"'),
    ],
)
def test_quote_ident_wraps_and_doubles_quotes(name: str, quoted: str) -> None:
    assert quote_ident(name) == quoted


@pytest.mark.parametrize("name", ["", "nul\x00byte"])
def test_quote_ident_rejects_what_postgres_cannot_name(name: str) -> None:
    with pytest.raises(ValueError, match="invalid SQL identifier"):
        quote_ident(name)


def test_agent_schema_and_role_share_the_prefixed_name() -> None:
    assert agent_schema("my-agent") == "choir_my-agent"
    assert agent_role("my-agent") == "choir_my-agent"


@pytest.mark.parametrize("agent_id", ["", "Main", "1st", "a" * 32, 'x"; drop', "a.b"])
def test_agent_schema_rejects_ids_outside_the_safe_pattern(agent_id: str) -> None:
    with pytest.raises(ValueError, match="invalid agent id"):
        agent_schema(agent_id)
