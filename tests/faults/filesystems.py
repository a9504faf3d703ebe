"""Small file systems a fault test can fill or break: a tmpfs of a few hundred KiB mounted for
the test, or an ext4 image on a loop device that the kernel can be told to fail.

Mounting needs root (CI runs as root). Without it the test is skipped on a developer's machine
and fails in CI (`CHOIR_REQUIRE_DOCKER=1`, which CI sets for every component it installs).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
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


class FailingExt4:
    """An ext4 file system in a small image on a loop device, mounted with
    `errors=remount-ro`: `fail()` makes the kernel record an error in it, after which it is
    read-only (EROFS) for every writer, files already open included — what a disk error does."""

    def __init__(self, mountpoint: Path, device: str) -> None:
        self.mountpoint = mountpoint
        self.device = device

    def fail(self) -> None:
        trigger = Path("/sys/fs/ext4") / Path(self.device).name / "trigger_fs_error"
        trigger.write_text("choir fault test\n")


@contextlib.contextmanager
def failing_ext4(mountpoint: Path, image_dir: Path, size_mib: int = 16) -> Iterator[FailingExt4]:
    """A `FailingExt4` at `mountpoint` (created), its image in `image_dir`; unmounted (lazily:
    a writer may still hold a file) and its loop device released afterwards."""
    require_root()
    for tool in ("losetup", "mkfs.ext4"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: apt-get install util-linux e2fsprogs", pytrace=False)
    image = image_dir / "ext4.img"
    with image.open("wb") as sparse:
        sparse.truncate(size_mib << 20)
    _run("mkfs.ext4", "-q", "-F", str(image))
    device = _run("losetup", "--find", "--show", str(image)).strip()
    try:
        mountpoint.mkdir(parents=True, exist_ok=True)
        _run("mount", "-t", "ext4", "-o", "errors=remount-ro", device, str(mountpoint))
        try:
            yield FailingExt4(mountpoint, device)
        finally:
            subprocess.run(
                ["umount", "-l", str(mountpoint)], check=False, capture_output=True, timeout=10
            )
    finally:
        # Detached now, or (autoclear) once the last holder of its file system lets go.
        subprocess.run(["losetup", "-d", device], check=False, timeout=10, capture_output=True)


def _run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30).stdout
