"""choird's first `agent start` after its own start checks no tool schema it already knows
valid: the seed tools' and skills' as shipped, and those an earlier choird on the home checked
(`runtimes/schema_memo`). Loading `jsonschema` and walking its meta-schema for each tool was
~0.15 s of CPU on the path of the first reply (bench.step_e2e `first_reply_s`).

Each build runs in a fresh interpreter, as a restarted choird would, on a `choirctl init` home.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from choir.config import init_home
from choir.config.scaffolding.scaffold import global_seed_dir
from choir.daemon.runtimes.schema_memo import FILE_NAME, seed_schemas
from choir.home import ChoirHome
from tests.build.support import TOOL_TEMPLATE

REPO_ROOT = Path(__file__).resolve().parents[2]

BUILD = """
import sys
from pathlib import Path
from choir.config import load_home
from choir.daemon.runtimes.process import ProcessRuntime
from choir.daemon.sessions.service import SessionService
from choir.errors import ConfigError
from choir.home import ChoirHome

home = ChoirHome(Path(sys.argv[1]))
config = load_home(home).config
runtime = ProcessRuntime(home, SessionService(None, None), lambda *_: None)  # no pool is used
try:
    runtime.materialize("agent-1", config)
    print("built", "jsonschema" in sys.modules)
except ConfigError as error:
    print("refused", "jsonschema" in sys.modules, error.message.replace("\\n", " "))
"""


def build(home: ChoirHome) -> tuple[str, bool, str]:
    """Build agent-1's tree as a freshly started choird does: what came of it, whether
    `jsonschema` was loaded, and the refusal if any."""
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(home.root)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    outcome, loaded, *said = done.stdout.strip().split(" ", 2)
    return outcome, loaded == "True", " ".join(said)


@pytest.fixture
def home(tmp_path: Path) -> ChoirHome:
    home = ChoirHome(tmp_path / "h")
    init_home(home)
    return home


def add_tool(home: ChoirHome, name: str, parameters: dict[str, object]) -> None:
    """A tool of the operator's own in the global repo (read in place, uncommitted)."""
    global_repo = Path(json.loads(home.config_file.read_text())["global_repo"]["url"])
    document = json.loads(json.dumps(TOOL_TEMPLATE))
    document["llm"].update(name=name, parameters=parameters)
    (global_repo / "tools" / f"{name}.json").write_text(json.dumps(document))


def test_the_seed_tree_is_built_without_loading_jsonschema(home: ChoirHome) -> None:
    assert build(home)[:2] == ("built", False)


def test_a_schema_checked_by_one_choird_is_not_checked_by_the_next(home: ChoirHome) -> None:
    add_tool(home, "test.custom", {"type": "object", "properties": {"n": {"maximum": 7}}})
    assert build(home)[:2] == ("built", True)
    assert (home.root / "runtime" / FILE_NAME).stat().st_mode & 0o777 == 0o600
    assert build(home)[:2] == ("built", False)


def test_an_invalid_schema_is_refused_at_every_start(home: ChoirHome) -> None:
    add_tool(home, "test.broken", {"type": "object", "properties": {"n": {"type": 5}}})
    for _ in range(2):
        outcome, loaded, said = build(home)
        assert (outcome, loaded) == ("refused", True)
        assert "tools/global/test.broken.json" in said
        assert "not a valid JSON Schema (Draft 2020-12)" in said


def test_a_memo_written_by_another_check_is_ignored(home: ChoirHome) -> None:
    add_tool(home, "test.custom", {"type": "object", "properties": {"n": {"maximum": 7}}})
    build(home)
    memo = home.root / "runtime" / FILE_NAME
    lines = memo.read_text().splitlines()
    memo.write_text("\n".join(["choir-valid-schemas 0 0.0.0", *lines[1:]]) + "\n")
    assert build(home)[:2] == ("built", True)


def test_every_seed_schema_taken_as_valid_is_valid() -> None:
    """What makes trusting the seeds sound: jsonschema itself finds each valid."""
    root = global_seed_dir()
    found = 0
    for path in [*root.glob("tools/*.json"), *root.glob("skills/*.json")]:
        for schema in seed_schemas(json.loads(path.read_text())):
            Draft202012Validator.check_schema(schema)
            found += 1
    assert found >= 20
