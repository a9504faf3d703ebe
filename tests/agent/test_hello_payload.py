"""choir-agent sends INIT_HELLO as plain JSON, before pydantic loads (`startup.hello_payload`):
what goes on the wire is exactly the `InitHelloRequest` it sent before, and a version.json choir
did not write is refused in one line instead of a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from choir.agent.startup import INIT_HELLO, AgentOptions, hello_payload
from choir.errors import UsageError
from choir.protocol import PROTOCOL_VERSION, InitHelloRequest, Verb

VERSION = {
    "agent_id": "agent-1",
    "image_version": "3d27bd3-513aa1c",
    "global_repo_commit": "g" * 40,
    "agent_repo_commit": "a" * 40,
    "tool_manifest_hash": "0" * 64,
    "skill_manifest_hash": "1" * 64,
}


def options(root: Path) -> AgentOptions:
    env = {"CHOIR_AGENT_ID": "agent-1", "CHOIR_SESSION_ID": "s-1", "CHOIR_LEASE_TOKEN": "t"}
    return AgentOptions.from_env("/x.sock", root=root, workspace=root, environ=env)


def test_the_payload_is_the_init_hello_request_in_wire_form(tmp_path: Path) -> None:
    (tmp_path / "version.json").write_text(json.dumps(VERSION))
    payload = hello_payload(options(tmp_path))
    request = InitHelloRequest.model_validate(payload)
    assert request.model_dump(mode="json") == payload
    assert payload == {
        "protocol_version": PROTOCOL_VERSION,
        "agent_id": "agent-1",
        "session_id": "s-1",
        "image_version": VERSION["image_version"],
        "tool_manifest_hash": VERSION["tool_manifest_hash"],
        "skill_manifest_hash": VERSION["skill_manifest_hash"],
    }


def test_the_verb_is_spelled_as_the_wire_spells_it() -> None:
    assert Verb.INIT_HELLO.value == INIT_HELLO


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "unreadable"),
        ("[]", "not a version.json choir wrote"),
        (json.dumps({**VERSION, "tool_manifest_hash": 7}), "not a version.json choir wrote"),
        (json.dumps({"agent_id": "agent-1"}), "not a version.json choir wrote"),
    ],
)
def test_a_version_json_choir_did_not_write_is_refused_in_one_line(
    tmp_path: Path, text: str, said: str
) -> None:
    (tmp_path / "version.json").write_text(text)
    with pytest.raises(UsageError) as refused:
        hello_payload(options(tmp_path))
    assert said in refused.value.message
    assert "rebuild the agent" in refused.value.message
    assert "\n" not in refused.value.message
