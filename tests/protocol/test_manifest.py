"""Tool manifests: dual view, lock templates, meta tools, and the LLM-facing rendering."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from choir.protocol import LockSpec, ToolManifest, from_wire_name, validation_problems


def _manifest() -> dict[str, Any]:
    return {
        "llm": {
            "name": "choir.fs.read",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "lines": {"type": "integer"}},
                "required": ["path"],
            },
        },
        "runtime": {
            "implementation": "builtin",
            "locks": [{"resource": "file:{path}", "mode": "S"}],
            "side_effect": "read",
            "idempotent": True,
        },
    }


def _problems(document: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        ToolManifest.model_validate(document)
    return validation_problems(caught.value)


def test_valid_manifest_gets_runtime_defaults():
    manifest = ToolManifest.model_validate(_manifest())

    assert manifest.name == "choir.fs.read"
    assert (manifest.runtime.timeout_ms, manifest.runtime.exposure) == (30_000, "both")
    assert not manifest.runtime.meta


def test_llm_view_is_the_openai_tools_entry_with_a_reversible_wire_name():
    manifest = ToolManifest.model_validate(_manifest())

    view = manifest.llm_view()

    assert view == {
        "type": "function",
        "function": {
            "name": "choir__fs__read",
            "description": "Read a file.",
            "parameters": _manifest()["llm"]["parameters"],
        },
    }
    assert from_wire_name(view["function"]["name"]) == manifest.name


def test_llm_view_carries_no_runtime_metadata():
    view = ToolManifest.model_validate(_manifest()).llm_view()

    assert "locks" not in str(view)
    assert "side_effect" not in str(view)


def test_input_problems_validate_arguments_against_the_schema():
    manifest = ToolManifest.model_validate(_manifest())

    assert manifest.input_problems({"path": "a.txt", "lines": 3}) == []
    assert manifest.input_problems({"lines": "3"}) == [
        "(input): 'path' is a required property",
        "lines: '3' is not of type 'integer'",
    ]


def _edit(path: str, value: Any) -> dict[str, Any]:
    document = copy.deepcopy(_manifest())
    *parents, last = path.split(".")
    target = document
    for key in parents:
        target = target[key]
    if value is None:
        del target[last]
    else:
        target[last] = value
    return document


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (
            _edit("llm.name", "ChoirRead"),
            "llm.name: invalid tool name 'ChoirRead': use dotted lowercase segments like "
            "'choir.fs.read' (letters, digits, single inner underscores; at least two segments)",
        ),
        (
            _edit("runtime.implementation", "external"),
            'runtime.exec_path: required when implementation is "external" '
            "(e.g. /choir/tools/global/<name>)",
        ),
        (
            _edit("runtime.exec_path", "/choir/tools/global/read"),
            'runtime.exec_path: only "external" tools have an executable; '
            "remove exec_path or set implementation to external",
        ),
        (
            _edit("llm.parameters", {"type": "objekt"}),
            "llm.parameters: not a valid JSON Schema (Draft 2020-12) at type: "
            "'objekt' is not valid under any of the given schemas",
        ),
        (
            _edit("llm.parameters", {"type": "array"}),
            'llm.parameters: tool parameters must be an object schema ("type": "object")',
        ),
        (
            _edit("runtime.locks", [{"resource": "file:{filename}", "mode": "S"}]),
            "runtime.locks[0].resource: 'file:{filename}' names input field 'filename', "
            "which llm.parameters does not define",
        ),
        (
            _edit("runtime.locks", [{"resource": "file:{lines}", "mode": "S"}]),
            "runtime.locks[0].resource: 'file:{lines}' needs input field 'lines' on every call; "
            "make it required or give it a default",
        ),
        (
            _edit("runtime.locks", [{"resource": "disk", "mode": "X"}]),
            "runtime.locks[0].resource: unknown lock resource 'disk': use workspace, browser_tab, "
            "choirtmp, or file:/mem:/repo:/net:/ext: followed by a name or an {input-field} "
            "template",
        ),
        (
            _edit("runtime.locks", [{"resource": "workspace", "mode": "R"}]),
            "runtime.locks[0].mode: Input should be 'S' or 'X'",
        ),
        (
            _edit(
                "runtime.locks",
                [{"resource": "workspace", "mode": "S"}, {"resource": "workspace", "mode": "X"}],
            ),
            "runtime.locks: each resource may appear only once",
        ),
        (
            _edit("runtime.meta", True),
            "runtime.locks: meta tools never hold locks; remove them",
        ),
        (
            _edit("llm.name", "choir.propose.tool"),
            "runtime.meta: choir.propose.* tools are meta tools; set meta: true",
        ),
        (
            _edit("runtime.secret_resources", ["openrouter-key"]),
            "runtime.secret_resources[0]: Input should be 'llm', 'voice_profile', 'git_identity', "
            "'notion', 'email' or 'search'",
        ),
        (_edit("runtime.side_effect", None), "runtime.side_effect: Field required"),
    ],
)
def test_invalid_manifest_gets_a_precise_problem(document: dict[str, Any], problem: str):
    assert _problems(document) == [problem]


def test_external_manifest_with_absolute_exec_path_is_valid():
    document = _edit("runtime.implementation", "external")
    document["runtime"]["exec_path"] = "/choir/tools/agent/read"

    assert ToolManifest.model_validate(document).runtime.exec_path == "/choir/tools/agent/read"


def test_relative_exec_path_is_refused():
    document = _edit("runtime.implementation", "external")
    document["runtime"]["exec_path"] = "tools/read"

    assert _problems(document) == ["runtime.exec_path: 'tools/read' must be an absolute path"]


@pytest.mark.parametrize(
    "resource",
    [
        "workspace",
        "browser_tab",
        "choirtmp",
        "file:{path}",
        "file:README.md",
        "mem:main-ws",
        "repo:{repo}",
        "net:brave",
        "ext:smtp",
    ],
)
def test_every_namespace_of_section_9_2_is_accepted(resource: str):
    assert LockSpec(resource=resource, mode="S").resource == resource


@pytest.mark.parametrize(
    "resource", ["file:", "file:{path", "file:{}", "file:{a-b}", "net", "tmp:x"]
)
def test_malformed_lock_resources_are_refused(resource: str):
    with pytest.raises(ValidationError):
        LockSpec(resource=resource, mode="S")


def test_lock_template_resolves_with_call_arguments():
    lock = TypeAdapter(LockSpec).validate_python({"resource": "file:{path}", "mode": "X"})

    assert lock.template_fields() == ("path",)
    assert lock.resolve({"path": "src/auth.py"}) == "file:src/auth.py"
    with pytest.raises(ValueError, match="needs input field 'path'"):
        lock.resolve({})
