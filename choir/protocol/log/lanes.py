"""Lane identifiers and lane states (§7.2, §7.3, §9.4).

A lane id is `edge` or `core:<job-name>`. It names the lane that committed an event and is the
owner id in the lock table, so it must be unambiguous: job names are safe slugs.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, WithJsonSchema

EDGE_LANE: Final = "edge"
CORE_LANE_PREFIX: Final = "core:"

JOB_NAME_PATTERN: Final = r"^[a-z0-9][a-z0-9-]{0,62}$"
LANE_PATTERN: Final = r"^(?:edge|core:[a-z0-9][a-z0-9-]{0,62})$"
_JOB_NAME_RE: Final = re.compile(JOB_NAME_PATTERN)
_LANE_RE: Final = re.compile(LANE_PATTERN)


def _check_job_name(value: str) -> str:
    if not _JOB_NAME_RE.fullmatch(value):
        raise ValueError(
            f"invalid job name {value!r}: use 1-63 lowercase letters, digits and hyphens, "
            "starting with a letter or digit (e.g. refactor-auth)"
        )
    return value


def _check_lane(value: str) -> str:
    if not _LANE_RE.fullmatch(value):
        raise ValueError(f"invalid lane {value!r}: use 'edge' or 'core:<job-name>'")
    return value


JobName = Annotated[
    str,
    AfterValidator(_check_job_name),
    WithJsonSchema({"type": "string", "pattern": JOB_NAME_PATTERN}),
]
"""A core job's user-friendly name (e.g. `refactor-auth`); also part of its lane id."""

LaneId = Annotated[
    str,
    AfterValidator(_check_lane),
    WithJsonSchema({"type": "string", "pattern": LANE_PATTERN}),
]
"""`edge` or `core:<job-name>`: who committed an event, who owns a lock."""


def core_lane(job_name: str) -> str:
    """The lane id of core job `job_name`."""
    return CORE_LANE_PREFIX + _check_job_name(job_name)


def job_name_of(lane: str) -> str | None:
    """The job name of a core lane id, None for the edge lane."""
    if lane.startswith(CORE_LANE_PREFIX):
        return lane[len(CORE_LANE_PREFIX) :]
    return None


def is_lane(value: str) -> bool:
    return _LANE_RE.fullmatch(value) is not None


EdgeStatus = Literal[
    "EDGE_IDLE",
    "EDGE_CONTEXT_READY",
    "EDGE_REASONING",
    "EDGE_WAITING_TOOL",
    "EDGE_WAITING_INFO",
    "EDGE_FINALIZING",
    "EDGE_TERMINATED",
]
"""The edge lane's states (§7.2; EDGE_WAITING_CORE was removed by the spec), plus
EDGE_WAITING_INFO: a budget or the spend cap ran out mid-reply and a human is asked to extend
it (issue 19), as a core job's CORE_WAITING_INFO."""

CoreStatus = Literal[
    "CORE_IDLE",
    "CORE_CREATED",
    "CORE_INITIALIZING",
    "CORE_REASONING",
    "CORE_WAITING_TOOL",
    "CORE_WAITING_INFO",
    "CORE_COMPLETED",
    "CORE_TERMINATED",
]
"""A core job's states (§7.3), plus CORE_WAITING_INFO: a `need_info` question is out to edge
and the job waits for the answer (its report call is the tool it waits on)."""

LaneStatus = EdgeStatus | CoreStatus
"""Any lane's state, as reported by REPORT_STATUS and kept in snapshots."""
