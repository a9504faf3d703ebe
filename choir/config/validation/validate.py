"""Validate config.json text in one pass that reports every problem, not just the first.

Pure: the caller reads the files. Errors make the config unusable; warnings (placeholders, unset
secrets) leave it loadable but say what will fail later.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

from choir.config.jsonparse import parse_json_object
from choir.config.model import ChoirConfig
from choir.config.validation.checks import rule_problems
from choir.config.validation.problems import problems_of
from choir.config.validation.references import (
    missing_secret_warnings,
    placeholder_warnings,
    reference_problems,
)

CONFIG_SOURCE = "config.json"


@dataclass(frozen=True)
class ValidationReport:
    """The validated config (None when there are errors), every error and every warning."""

    config: ChoirConfig | None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def validate_config_text(text: str, secret_names: Collection[str] | None) -> ValidationReport:
    """Check config.json's text; `secret_names` are the secrets set (None: unknown, skip)."""
    parsed = parse_json_object(text, CONFIG_SOURCE)
    if parsed.data is None:
        return ValidationReport(None, parsed.problems)
    return validate_config_data(parsed.data, secret_names, parsed.problems)


def validate_config_data(
    data: dict[str, Any],
    secret_names: Collection[str] | None,
    parse_problems: Collection[str] = (),
) -> ValidationReport:
    """Check decoded config.json data; `parse_problems` (duplicates) are reported first."""
    errors = list(parse_problems)
    config: ChoirConfig | None = None
    try:
        config = ChoirConfig.model_validate(data)
    except ValidationError as err:
        errors.extend(problems_of(err))
    errors.extend(reference_problems(data))
    if config is not None:
        errors.extend(rule_problems(config))
    warnings = placeholder_warnings(data)
    if secret_names is not None:
        warnings.extend(missing_secret_warnings(data, secret_names))
    return ValidationReport(config if not errors else None, errors, warnings)


def config_hash(config: ChoirConfig) -> str:
    """A stable content hash of the validated config: equal configs hash equal.

    Computed over the canonical JSON of the model (defaults filled in, keys sorted), so
    reformatting config.json or spelling out a default does not change it.
    """
    canonical = orjson.dumps(config.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()
