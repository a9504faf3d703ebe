"""Read and validate one `$CHOIR_HOME`: config.json and secrets.json together (§6.2 steps 1-2)."""

from __future__ import annotations

from dataclasses import dataclass, field

from choir.config.jsonparse import parse_json_object
from choir.config.model import ChoirConfig
from choir.config.secret_store import SecretStore
from choir.config.validation.references import secret_references
from choir.config.validation.validate import (
    CONFIG_SOURCE,
    ValidationReport,
    config_hash,
    validate_config_text,
)
from choir.config.validation.workspace_paths import dangerous_workspaces
from choir.errors import ChoirError, ConfigError, NotFoundError
from choir.home import ChoirHome


@dataclass(frozen=True)
class LoadedConfig:
    """A valid config, the secrets it may use, what to warn about, and its content hash."""

    home: ChoirHome
    config: ChoirConfig
    secrets: SecretStore
    config_hash: str
    warnings: list[str] = field(default_factory=list)


def read_config_text(home: ChoirHome) -> str:
    path = home.config_file
    if not path.exists():
        raise NotFoundError(f"{path} does not exist: run choirctl init")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(["config.json: not valid UTF-8"]) from None
    except OSError as err:
        raise ChoirError(f"cannot read {path}: {err.strerror}") from None


def check_home(home: ChoirHome) -> tuple[ValidationReport, SecretStore | None]:
    """Validate both files, collecting every problem; never raises for an invalid config."""
    text = read_config_text(home)
    secrets: SecretStore | None = None
    secret_problems: list[str] = []
    try:
        secrets = SecretStore.load(home.secrets_file)
    except ConfigError as err:
        secret_problems = err.problems
    report = validate_config_text(text, secrets.names() if secrets is not None else None)
    warnings = list(report.warnings)
    if not home.secrets_file.exists():
        warnings.append(
            f"secrets.json: {home.secrets_file} does not exist, so no secret is set "
            "(choirctl secret set <name> creates it)"
        )
    errors = [*secret_problems, *report.errors]
    if report.config is not None:
        paths = {name: ws.path for name, ws in report.config.workspaces.items()}
        errors += dangerous_workspaces(paths, str(home.root))
    config = report.config if not errors else None
    return ValidationReport(config, errors, warnings), secrets


def problems_header(problems: list[str]) -> str:
    both = any(problem.startswith("secrets.json") for problem in problems)
    files = "config.json and secrets.json have" if both else "config.json has"
    return f"{files} {len(problems)} problem(s):"


def load_home(home: ChoirHome) -> LoadedConfig:
    """The validated config of `home`; raises `ConfigError` listing every problem."""
    report, secrets = check_home(home)
    if report.config is None or secrets is None:
        raise ConfigError(report.errors, header=problems_header(report.errors))
    return LoadedConfig(home, report.config, secrets, config_hash(report.config), report.warnings)


def read_secret_references(home: ChoirHome) -> dict[str, list[str]] | None:
    """Secret name -> config paths naming it, read leniently; None if config.json is unreadable."""
    try:
        parsed = parse_json_object(read_config_text(home), CONFIG_SOURCE)
    except ChoirError:
        return None
    return secret_references(parsed.data) if parsed.data is not None else None
