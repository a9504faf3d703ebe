"""`choir up`'s first step: a `$CHOIR_HOME` to run, made as `choirctl init` makes it if missing.

The embedded defaults (DESIGN-NOTES): embedded Postgres, the local global repo from `seeds/`,
agent-1 bound to the console DM, and the scripted demo model — unless a model key is in the
environment (`OPENROUTER_API_KEY`, `OPENAI_API_KEY`): then the key goes into secrets.json
(0600; never into config.json, logs or choird's environment) and a real model becomes agent-1's
default. An existing home is used as it is: `choir up` never edits an operator's config.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from choir.config import SecretStore, init_home
from choir.config.atomic import atomic_write
from choir.config.scaffolding.home_setup import CONFIG_MODE
from choir.config.scaffolding.skeleton import DEFAULT_AGENT, DEMO_MODEL, render
from choir.home import ChoirHome


@dataclass(frozen=True)
class KeyedModel:
    """A real model `choir up` configures when its key is in the environment."""

    env: str
    """The environment variable holding the key."""
    name: str
    """The model's name in config.json (and of the secret: `<name>-key`)."""
    provider: str
    endpoint: str
    model: str
    """The provider's model name; `CHOIR_MODEL` in the environment overrides it."""


KEYED_MODELS: Final = (
    KeyedModel(
        "OPENROUTER_API_KEY",
        "openrouter",
        "openrouter",
        "https://openrouter.ai/api/v1",
        "anthropic/claude-sonnet-4",
    ),
    KeyedModel("OPENAI_API_KEY", "openai", "openai", "https://api.openai.com/v1", "gpt-4o"),
)
"""Checked in order; the first key present wins."""
MODEL_ENV: Final = "CHOIR_MODEL"


@dataclass(frozen=True)
class HomeReady:
    home: ChoirHome
    created: bool
    """False when an existing home was used as it is."""
    model: str
    """What agent-1 talks with (a new home): `demo` or the keyed model's name."""


def prepare_home(home: ChoirHome, environ: Mapping[str, str] = os.environ) -> HomeReady:
    """`home` ready to run: initialised when it has no config.json, else left alone."""
    if home.config_file.is_file():
        return HomeReady(home, created=False, model="")
    init_home(home)
    keyed = next((k for k in KEYED_MODELS if environ.get(k.env)), None)
    if keyed is None:
        return HomeReady(home, created=True, model=DEMO_MODEL)
    _use_model(home, keyed, environ[keyed.env], environ.get(MODEL_ENV) or keyed.model)
    return HomeReady(home, created=True, model=keyed.name)


def _use_model(home: ChoirHome, keyed: KeyedModel, key: str, model: str) -> None:
    """Store the key as a secret, add the model, make it agent-1's default."""
    secret = f"{keyed.name}-key"
    SecretStore.load(home.secrets_file).with_secret(secret, key).save(home.secrets_file)
    data: dict[str, Any] = json.loads(home.config_file.read_text())
    data["models"][keyed.name] = {
        "provider": keyed.provider,
        "model": model,
        "endpoint": keyed.endpoint,
        "secret": secret,
    }
    data["agents"][DEFAULT_AGENT]["defaults"]["llm"] = keyed.name
    atomic_write(home.config_file, render(data).encode(), CONFIG_MODE)
