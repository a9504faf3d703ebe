"""Field descriptions read from a source file are kept beside its bytecode
(`choir.protocol.docstring_cache`): the next process reads them instead of parsing the file,
unless the file changed or the cache is unusable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

MODULE = '''
from choir.protocol.base import WireModel


class Thing(WireModel):
    size: int = 0
    """{doc}"""
'''

PROBE = """
import ast, sys
if sys.argv[1] == "no parsing":
    def refuse(*args, **kwargs):
        raise AssertionError("parsed")
    ast.parse = refuse
from thing import Thing
print(Thing.model_fields["size"].description)
"""


def write(folder: Path, doc: str) -> Path:
    source = folder / "thing.py"
    source.write_text(MODULE.format(doc=doc))
    return source


def describe(folder: Path, *, parse: bool = True, bytecode: bool = True) -> str:
    env = {**os.environ, "PYTHONPATH": str(folder)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "parse" if parse else "no parsing"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def cache_of(folder: Path) -> Path:
    return folder / "__pycache__" / f"thing.{sys.implementation.cache_tag}.docs.json"


def test_a_second_process_reads_the_docstrings_without_parsing(tmp_path: Path) -> None:
    write(tmp_path, "How big.")
    assert describe(tmp_path) == "How big."
    assert cache_of(tmp_path).is_file()
    assert describe(tmp_path, parse=False) == "How big."


def test_a_changed_file_is_parsed_again(tmp_path: Path) -> None:
    source = write(tmp_path, "How big.")
    assert describe(tmp_path) == "How big."
    stat = source.stat()
    write(tmp_path, "How large.")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert describe(tmp_path) == "How large."
    assert describe(tmp_path, parse=False) == "How large."


def test_a_file_changed_to_the_same_size_within_its_second_is_parsed_again(
    tmp_path: Path,
) -> None:
    source = write(tmp_path, "How big.")
    stat = source.stat()
    assert describe(tmp_path) == "How big."
    write(tmp_path, "How wee.")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert describe(tmp_path) == "How wee."


def test_the_cache_holds_when_the_modification_time_loses_its_fraction(tmp_path: Path) -> None:
    """As an image's layers keep it: the cache made at the build is read in every container."""
    source = write(tmp_path, "How big.")
    os.utime(source, ns=(1_795_738_377_022_212_816, 1_795_738_377_022_212_816))
    assert describe(tmp_path) == "How big."
    os.utime(source, ns=(1_795_738_377_000_000_000, 1_795_738_377_000_000_000))
    assert describe(tmp_path, parse=False) == "How big."


def test_no_cache_folder_is_made_where_no_bytecode_is(tmp_path: Path) -> None:
    write(tmp_path, "How big.")
    assert describe(tmp_path, bytecode=False) == "How big."
    assert not (tmp_path / "__pycache__").exists()


def test_the_cache_goes_beside_existing_bytecode_while_bytecode_writing_is_off(
    tmp_path: Path,
) -> None:
    """As in an image (PYTHONDONTWRITEBYTECODE set, pip's bytecode in place)."""
    write(tmp_path, "How big.")
    (tmp_path / "__pycache__").mkdir()
    assert describe(tmp_path, bytecode=False) == "How big."
    assert describe(tmp_path, parse=False, bytecode=False) == "How big."


@pytest.mark.parametrize("content", [b"", b"not json", b'{"key": [1, 2, 3], "classes": {}}'])
def test_an_unusable_cache_is_parsed_around_and_replaced(tmp_path: Path, content: bytes) -> None:
    write(tmp_path, "How big.")
    cache_of(tmp_path).parent.mkdir()
    cache_of(tmp_path).write_bytes(content)
    assert describe(tmp_path) == "How big."
    assert describe(tmp_path, parse=False) == "How big."


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    write(tmp_path, "How big.")
    (tmp_path / "__pycache__").write_text("a file where the cache folder would be")
    assert describe(tmp_path) == "How big."
