"""Lane ids, job names, tool names and the reversible tool wire-name mapping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from choir.protocol import (
    JobName,
    LaneId,
    ToolName,
    core_lane,
    from_wire_name,
    is_lane,
    is_tool_name,
    job_name_of,
    to_wire_name,
)
from choir.protocol.names import TOOL_NAME_PATTERN

lanes = TypeAdapter(LaneId)
job_names = TypeAdapter(JobName)
tool_names = TypeAdapter(ToolName)


@pytest.mark.parametrize(
    "lane", ["edge", "core:refactor-auth", "core:a", "core:1st-pass", f"core:{'a' * 63}"]
)
def test_valid_lanes(lane: str):
    assert lanes.validate_python(lane) == lane
    assert is_lane(lane)


@pytest.mark.parametrize(
    "lane",
    [
        "",
        "Edge",
        "core",
        "core:",
        "core:Refactor",
        "core:-x",
        "core:a b",
        "core:a/b",
        f"core:{'a' * 64}",
        "edge2",
        "core:x\n",
    ],
)
def test_invalid_lanes_name_the_expected_shape(lane: str):
    with pytest.raises(ValidationError, match="use 'edge' or 'core:<job-name>'"):
        lanes.validate_python(lane)
    assert not is_lane(lane)


def test_core_lane_round_trips_through_job_name_of():
    assert core_lane("write-tests") == "core:write-tests"
    assert job_name_of("core:write-tests") == "write-tests"
    assert job_name_of("edge") is None


@pytest.mark.parametrize("name", ["Refactor", "-x", "a_b", "", "a" * 64, "a.b"])
def test_invalid_job_names_are_refused(name: str):
    with pytest.raises(ValidationError, match="invalid job name"):
        job_names.validate_python(name)
    with pytest.raises(ValueError, match="invalid job name"):
        core_lane(name)


@pytest.mark.parametrize(
    "name", ["choir.fs.read", "choir.propose.config_change", "acme.git.commit_all", "a.b"]
)
def test_valid_tool_names(name: str):
    assert tool_names.validate_python(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "choir",
        "Choir.fs.read",
        "choir..read",
        "choir.fs.",
        ".fs",
        "choir.fs__x",
        "choir._fs",
        "choir.fs_",
        "choir.1fs",
        "choir.fs-read",
        "choir.fs.read\n",
    ],
)
def test_invalid_tool_names_are_refused(name: str):
    with pytest.raises(ValidationError, match="invalid tool name"):
        tool_names.validate_python(name)
    assert not is_tool_name(name)


def test_tool_name_whose_wire_name_exceeds_64_characters_is_refused():
    name = "choir." + "a" * 59
    assert len(to_wire_name(name)) == 66

    with pytest.raises(ValidationError, match="too long"):
        tool_names.validate_python(name)


def test_wire_name_mapping():
    assert to_wire_name("choir.fs.read") == "choir__fs__read"
    assert from_wire_name("choir__fs__read") == "choir.fs.read"
    assert (
        from_wire_name(to_wire_name("choir.propose.config_change")) == "choir.propose.config_change"
    )


@given(st.from_regex(TOOL_NAME_PATTERN, fullmatch=True))
def test_wire_name_mapping_is_reversible_and_openai_safe(name: str):
    wire = to_wire_name(name)

    assert from_wire_name(wire) == name
    assert all(char.isalnum() or char in "_-" for char in wire)
