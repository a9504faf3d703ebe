"""Small file systems a fault test can fill: a tmpfs of a few hundred KiB mounted for the test.

Mounting needs root (CI runs as root). Without it the test is skipped on a developer's machine
and fails in CI (`CHOIR_REQUIRE_DOCKER=1`, which CI sets for every component it installs).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docker_support import REQUIRE_ENV


def require_root() -> None:
    if os.geteuid() == 0:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but mounting a test file system needs root", pytrace=False)
    pytest.skip("mounting a test file system needs root")


@contextlib.contextmanager
def small_tmpfs(
    mountpoint: Path, size_kib: int, *, mode: int = 0o755, inodes: int | None = None
) -> Iterator[Path]:
    """A tmpfs of `size_kib` KiB (and `inodes` files) at `mountpoint` (created), unmounted
    afterwards."""
    require_root()
    mountpoint.mkdir(parents=True, exist_ok=True)
    options = f"size={size_kib}k,mode={mode:o}" + (f",nr_inodes={inodes}" if inodes else "")
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "choir-test", str(mountpoint)],
        check=True,
        capture_output=True,
        timeout=10,
    )
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False, timeout=10)


def fill(directory: Path, name: str = "filler") -> Path:
    """Write to `directory/name` until the file system is full; the filler file."""
    filler = directory / name
    chunk = b"\0" * 4096
    with filler.open("ab", buffering=0) as sink:
        while True:
            try:
                if sink.write(chunk) == 0:
                    break
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                break
    with contextlib.suppress(OSError), filler.open("ab", buffering=0) as sink:
        while sink.write(b"\0"):  # the last few bytes of the last page
            pass
    return filler
