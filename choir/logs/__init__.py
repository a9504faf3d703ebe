"""Structured logs (§22.2): JSON lines per source under `$CHOIR_HOME/logs`, redacted and archived.

    setup_logging(home, "choird", archive_threshold_lines=config.log_archive_threshold_lines)
    register_secrets(secret_values)                 # backstop: never a secret in a log line
    log = get_logger("choird.startup")
    with bind_context(session_id=session.id, lane="edge"):
        log.info("postgres ready", fields={"host": host})

`archive_agent_log` archives an agent's log when its process exits (choird's runtimes call it),
`live.LiveLogArchiver` while it runs past `log_archive_threshold_lines` (copy and truncate);
`read_log_lines` parses a log or archive back.
"""

from __future__ import annotations

from choir.logs.archive import (
    archive_agent_log,
    archived_logs,
    every_archive,
    last_archive,
    log_path,
)
from choir.logs.context import LogContext, bind_context, current_context, set_context
from choir.logs.formatter import JsonLinesFormatter
from choir.logs.handler import ArchivingFileHandler
from choir.logs.logger import ChoirLogger, get_logger
from choir.logs.reader import read_log_lines
from choir.logs.redaction import REDACTED, redact, redact_json, register_secrets, replace_secrets
from choir.logs.setup import (
    DEFAULT_ARCHIVE_THRESHOLD_LINES,
    set_archive_threshold,
    setup_logging,
    shutdown_logging,
)

__all__ = [
    "DEFAULT_ARCHIVE_THRESHOLD_LINES",
    "REDACTED",
    "ArchivingFileHandler",
    "ChoirLogger",
    "JsonLinesFormatter",
    "LogContext",
    "archive_agent_log",
    "archived_logs",
    "bind_context",
    "current_context",
    "every_archive",
    "get_logger",
    "last_archive",
    "log_path",
    "read_log_lines",
    "redact",
    "redact_json",
    "register_secrets",
    "replace_secrets",
    "set_archive_threshold",
    "set_context",
    "setup_logging",
    "shutdown_logging",
]
