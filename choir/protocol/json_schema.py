"""JSON Schema (Draft 2020-12) checks for tool inputs, skill I/O and core job outputs.

Two libraries, each for what it is best at: `jsonschema-rs` answers "is this valid?" in well under
a microsecond (every tool call asks), and `jsonschema` explains *why not* with precise, ranked
messages (only asked when the answer is no). Both are imported on first use: choirctl imports
the protocol at start-up and most commands never validate a schema.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

import orjson

from choir.protocol.problems import location

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as SchemaViolation
    from jsonschema.protocols import Validator


def ensure_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return `schema` unchanged, or raise ValueError saying where it breaks Draft 2020-12.

    `jsonschema` takes milliseconds per tool (tens of ms for a tool tree, paid by choird building
    an agent's tree and by choir-agent loading its tools at every start). A schema already found
    valid in this process is not checked again; where jsonschema-rs is loaded (`fast_checks`:
    choir-agent, which validates every tool call with it) its meta-schema check answers in
    microseconds, and its yes is taken when `jsonschema` would say yes too: the schema names no
    other draft, and every regex compiles in Python's `re` (the one format `jsonschema` checks
    in a schema). Every other case, and every no, is `jsonschema`'s. choird does not load
    jsonschema-rs for this: 5 MB of resident memory for a check it makes once per schema; it
    remembers the schemas it found valid across its restarts instead (`remember_valid`)."""
    key = schema_digest(schema)
    if key is not None and key in _CHECKED:
        return schema
    if not _surely_valid(schema):
        _explained_check(schema)
    if key is not None:
        if len(_CHECKED) >= MAX_CHECKED:
            _CHECKED.clear()
        _CHECKED.add(key)
    return schema


CHECK_REVISION: Final = 1
"""Raise when `ensure_json_schema` starts refusing a schema it used to accept: digests that
earlier processes remembered (`remember_valid`) are then not taken any more."""
MAX_CHECKED: Final = 4096
"""Schemas remembered as valid (a tool tree has dozens)."""
_CHECKED: set[bytes] = set()
"""SHA-256 digests of the canonical JSON of the schemas found valid."""


def valid_digests() -> frozenset[bytes]:
    """What `ensure_json_schema` remembers as valid, as digests another run can be given."""
    return frozenset(_CHECKED)


def remember_valid(digests: Iterable[bytes]) -> None:
    """Take `digests` (from `valid_digests`, maybe of an earlier process) as schemas found
    valid: the caller vouches that they were, by this same check."""
    for digest in digests:
        if len(_CHECKED) >= MAX_CHECKED:
            return
        if len(digest) == hashlib.sha256().digest_size:
            _CHECKED.add(digest)


def fast_checks() -> None:
    """Load jsonschema-rs, so that `ensure_json_schema` takes its fast path (a process that
    validates tool calls loads it anyway)."""
    import jsonschema_rs  # noqa: F401


def schema_digest(schema: dict[str, Any]) -> bytes | None:
    """The digest of the schema's canonical JSON; None unless it is plain JSON (a tuple, a key
    not a string, NaN or an infinity would share their JSON with a different schema)."""
    if not _plain(schema):
        return None
    try:
        return hashlib.sha256(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)).digest()
    except TypeError:  # an integer beyond 64 bits
        return None


def _plain(node: Any) -> bool:
    if isinstance(node, dict):
        return all(isinstance(key, str) and _plain(value) for key, value in node.items())
    if isinstance(node, list):
        return all(_plain(item) for item in node)
    if isinstance(node, float):
        return math.isfinite(node)
    return node is None or isinstance(node, str | int)  # bool is an int


def _explained_check(schema: dict[str, Any]) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as err:
        where = "/".join(str(part) for part in err.absolute_path) or "the root"
        message = f"not a valid JSON Schema (Draft 2020-12) at {where}: {err.message}"
        raise ValueError(message) from None


def _surely_valid(schema: dict[str, Any]) -> bool:
    jsonschema_rs = sys.modules.get("jsonschema_rs")
    if jsonschema_rs is None or not _plain(schema):  # it would read a tuple as an array
        return False
    try:
        if "$schema" in schema or not jsonschema_rs.meta.is_valid(schema):
            return False
        for regex in _regexes(schema):
            re.compile(regex)
    except (re.error, ValueError, TypeError):  # no Python regex; no JSON (a key not a string)
        return False
    return True


def _regexes(node: Any) -> Iterator[str]:
    """Every `pattern` string and `patternProperties` key anywhere in `node` (a superset of
    the schema's regexes: a `pattern` inside a `const` or `default` is checked too)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            elif key == "patternProperties" and isinstance(value, dict):
                yield from (name for name in value if isinstance(name, str))
            yield from _regexes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _regexes(item)


class CompiledSchema:
    """A reusable validator for an already checked schema: fast yes/no, detailed no."""

    __slots__ = ("_explain", "_fast", "_schema")

    def __init__(self, schema: dict[str, Any]) -> None:
        import jsonschema_rs

        self._schema = schema
        self._fast = jsonschema_rs.Draft202012Validator(schema)
        self._explain: Validator | None = None

    def is_valid(self, instance: Any) -> bool:
        return bool(self._fast.is_valid(instance))

    def explainer(self) -> Validator:
        if self._explain is None:
            from jsonschema import Draft202012Validator

            self._explain = Draft202012Validator(self._schema)
        return self._explain


def compile_schema(schema: dict[str, Any]) -> CompiledSchema:
    """A reusable validator for an already checked schema."""
    return CompiledSchema(schema)


def violations(validator: CompiledSchema, instance: Any) -> list[str]:
    """Every way `instance` breaks the schema, one line each (`path: message`), best first."""
    return [violation_line(err) for err in violation_errors(validator, instance)]


def violation_errors(validator: CompiledSchema, instance: Any) -> list[SchemaViolation]:
    """Every way `instance` breaks the schema, as jsonschema's errors, best first."""
    if validator.is_valid(instance):  # the common case, without building error objects
        return []
    from jsonschema.exceptions import relevance

    return sorted(validator.explainer().iter_errors(instance), key=relevance, reverse=True)


def violation_line(error: SchemaViolation) -> str:
    """`path: message`, `(input): message` at the root."""
    return f"{location(list(error.absolute_path)) or '(input)'}: {error.message}"
