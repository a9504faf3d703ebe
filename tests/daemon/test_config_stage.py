"""Two-phase config: load stages all or nothing, diff classifies, apply bumps the version."""

from __future__ import annotations

import pytest

from choir.config import SecretStore
from choir.daemon.staging.diff import ConfigChange, render_changes
from choir.daemon.staging.stage import ConfigStage
from choir.errors import ConfigError, ConflictError

from .conftest import read_config, write_config


def edit(home, change) -> None:
    data = read_config(home)
    change(data)
    write_config(home, data)


async def test_a_config_with_errors_stages_nothing(stage: ConfigStage, home):
    edit(home, lambda d: d["models"]["demo"].update(temperature=0.2))
    await stage.load()
    assert stage.staged is not None

    def break_it(data):
        data["models"]["demo"]["temperature"] = 9
        data["agents"]["agent-1"]["defaults"]["workspace"] = "missing"

    edit(home, break_it)
    with pytest.raises(ConfigError) as caught:
        await stage.load()

    assert len(caught.value.problems) == 2
    assert "models.demo.temperature" in caught.value.problems[0]
    assert "missing" in caught.value.problems[1]
    assert stage.staged is None
    with pytest.raises(ConflictError, match="no config is staged: run choirctl config load first"):
        stage.apply()
    assert stage.running.version == 1


async def test_apply_makes_the_staged_config_run_under_the_next_version(stage, home):
    edit(home, lambda d: d["models"]["demo"].update(temperature=0.2))

    changes = await stage.load()
    applied = stage.apply()

    assert changes == [
        ConfigChange(
            "~", "config.json", "models.demo.temperature", "hot-reload", "choirctl config apply"
        )
    ]
    assert (applied.version, applied.changes) == (2, changes)
    assert stage.running.version == 2
    assert stage.running.config.models["demo"].temperature == 0.2
    assert stage.staged is None
    assert stage.show()["config_version"] == 2
    assert stage.show()["config"]["models"]["demo"]["temperature"] == 0.2
    with pytest.raises(ConflictError):
        stage.diff()


async def test_diff_tags_each_change_with_how_it_lands(stage, home, tmp_path):
    def change(data):
        data["models"]["demo"]["temperature"] = 0.3
        data["models"]["haiku"] = {**data["models"]["sonnet"], "model": "anthropic/haiku"}
        del data["voice_profiles"]["calm"]
        data["budgets"]["max_core_jobs"] = 5
        data["agents"]["agent-1"]["repo"]["ref"] = "dev"
        data["global_repo"]["ref"] = "dev"
        data["workspaces"]["other"]["path"] = str(tmp_path / "elsewhere")
        data["postgres"] = {"host": "db.local", "database": "choir", "secret": "telegram-token"}
        data["gateways"]["bot"]["base_url"] = "http://localhost:8081"
        data["rpc"]["read_timeout_ms"] = 5_000
        data["agents"]["agent-3"] = data["agents"]["agent-1"]
        data["agents"]["agent-2"]["defaults"]["voice_profile"] = None

    edit(home, change)
    SecretStore.load(home.secrets_file).with_secret("openrouter-key", "sk-or-2").with_secret(
        "new-key", "n"
    ).save(home.secrets_file)

    lines = [f"{c.op} {c.source}: {c.path} [{c.scope}] -> {c.action}" for c in await stage.load()]

    assert lines == [
        "~ config.json: agents.agent-1.repo.ref [restart-required] -> "
        "choirctl agent update agent-1",
        "~ config.json: agents.agent-2.defaults.voice_profile [restart-required] -> "
        "choirctl agent update agent-2",
        "+ config.json: agents.agent-3 [restart-required] -> choirctl agent start agent-3",
        "~ config.json: budgets.max_core_jobs [hot-reload] -> choirctl config apply",
        "~ config.json: gateways.bot.base_url [restart-required] -> choir restart",
        "~ config.json: global_repo.ref [restart-required] -> choirctl agent update-all",
        "~ config.json: models.demo.temperature [hot-reload] -> choirctl config apply",
        "+ config.json: models.haiku [hot-reload] -> choirctl config apply",
        "+ config.json: postgres.database [restart-required] -> choir restart",
        "~ config.json: postgres.embedded [restart-required] -> choir restart",
        "+ config.json: postgres.host [restart-required] -> choir restart",
        "+ config.json: postgres.port [restart-required] -> choir restart",
        "+ config.json: postgres.secret [restart-required] -> choir restart",
        "+ config.json: postgres.user [restart-required] -> choir restart",
        "~ config.json: rpc.read_timeout_ms [restart-required] -> choir restart",
        "- config.json: voice_profiles.calm [hot-reload] -> choirctl config apply",
        "~ config.json: workspaces.other.path [restart-required] -> choirctl agent update agent-2",
        "+ secrets.json: new-key [hot-reload] -> choirctl secret apply",
        "~ secrets.json: openrouter-key [hot-reload] -> choirctl secret apply",
    ]


async def test_diff_renders_like_the_spec(stage, home):
    edit(home, lambda d: d["models"]["sonnet"].update(temperature=0.1))
    edit(home, lambda d: d["agents"]["agent-1"]["repo"].update(ref="dev"))

    rendered = render_changes(await stage.load())

    assert rendered == [
        "~ config.json: agents.agent-1.repo.ref    [restart-required] → use: choirctl agent update "
        "agent-1",
        "~ config.json: models.sonnet.temperature  [hot-reload]       → included in: "
        "choirctl config apply",
    ]
    assert stage.diff()[1].render() == (
        "~ config.json: models.sonnet.temperature [hot-reload] → included in: choirctl config apply"
    )


async def test_an_unchanged_home_has_an_empty_diff(stage):
    assert await stage.load() == []


async def test_config_apply_does_not_reload_secrets_but_secret_apply_does(stage, home):
    SecretStore.load(home.secrets_file).with_secret("brave-key", "brave-2").save(home.secrets_file)
    await stage.load()
    stage.apply()
    assert stage.secrets.get("brave-key").get_secret_value() == "brave-1"

    store = await stage.reload_secrets()

    assert store is stage.secrets
    assert stage.secrets.get("brave-key").get_secret_value() == "brave-2"


async def test_secret_apply_refuses_a_readable_secrets_file(stage, home):
    home.secrets_file.chmod(0o644)

    with pytest.raises(ConfigError, match="chmod 600"):
        await stage.reload_secrets()

    assert stage.secrets.get("brave-key").get_secret_value() == "brave-1"


async def test_restart_only_changes_are_pending_and_shown_as_they_run(stage, home):
    """A choird section changed and one added to: pending, and `show` keeps what runs;
    an apply that puts it back clears it."""
    started = stage.show()["config"]

    def edit_choird_sections(data):
        data["rpc"] = {**data.get("rpc", {}), "read_timeout_ms": 20_000}
        data["gateways"]["bot-new"] = {"type": "telegram", "secret": "tg-bot-token"}
        data["models"]["demo"]["temperature"] = 0.2  # hot: runs at once

    edit(home, edit_choird_sections)
    await stage.load()
    stage.apply()

    pending = stage.pending()
    assert [(c.op, c.path) for c in pending] == [
        ("+", "gateways.bot-new"),
        ("~", "rpc.read_timeout_ms"),
    ]
    assert {c.action for c in pending} == {"choir restart"}
    shown = stage.show()["config"]
    assert shown["rpc"] == started["rpc"]
    assert shown["gateways"] == started["gateways"]
    assert shown["models"]["demo"]["temperature"] == 0.2
    assert stage.running.config.rpc.read_timeout_ms == 20_000  # applied: the next start's

    write_config(
        home, {**read_config(home), "rpc": started["rpc"], "gateways": started["gateways"]}
    )
    await stage.load()
    stage.apply()
    assert stage.pending() == []


async def test_a_spend_cap_and_a_price_are_hot_reloaded(stage: ConfigStage, home):
    def cap_and_price(data):
        data["agents"]["agent-1"]["spend_cap"] = {"day_usd": 5}
        data["models"]["demo"]["price"] = {"prompt": 3, "completion": 15}

    edit(home, cap_and_price)
    changes = await stage.load()
    stage.apply()

    assert [(c.path, c.scope, c.action) for c in changes] == [
        ("agents.agent-1.spend_cap", "hot-reload", "choirctl config apply"),
        ("models.demo.price", "hot-reload", "choirctl config apply"),
    ]
    spend_cap = stage.running.config.agents["agent-1"].spend_cap
    assert spend_cap is not None
    assert spend_cap.day_usd == 5
