"""The wheels the base image installs choir from: built on the host, so builds need no network
inside a container (pip there cannot verify TLS here, and many hosts have no index at all).

Two directories, each cached under the build cache by what they are made of:
- `choir-<hash>/`: choir's own wheel, built from the source tree this choird runs (keyed by the
  hash of its files, so an edit makes a new wheel and an unchanged tree reuses the old one);
- `deps-<hash>/`: choir-agent's dependencies, pinned to the versions installed next to choird
  and downloaded as wheels for the container's Python (keyed by the pinned list).
Host-only dependencies (Postgres, Docker, the TUI, the CLI) never enter the image.

The build cache is `$CHOIR_BUILD_CACHE`, else `$CHOIR_HOME/build`; pip's own cache lives in it
too, so nothing is written under the operator's home directory. `$CHOIR_WHEELHOUSE` replaces
both directories with ready-made ones.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import choir
from choir.errors import ChoirError
from choir.home import ChoirHome

if TYPE_CHECKING:
    from packaging.requirements import Requirement

CACHE_ENV: Final = "CHOIR_BUILD_CACHE"
WHEELHOUSE_ENV: Final = "CHOIR_WHEELHOUSE"
HOST_ONLY: Final = frozenset(
    {
        "asyncpg",
        "docker",
        "pgserver",
        "pgvector",
        "playwright",  # choird's browser worker (daemon/workers): the agent asks choird to browse
        "prometheus-client",  # choird's metrics endpoint (daemon/telemetry)
        "psutil",
        "rich",
        "textual",
        "typer",
        "watchfiles",
        "wordllama",  # choird's local embedding model (daemon/memory), with numpy and tokenizers
        "tokenizers",  # what choird reads wordllama's files with (daemon/memory/local_provider)
        "safetensors",
    }
)
"""choir's dependencies choir-agent never imports: left out of the image."""
IMAGE_PYTHON: Final = "3.11"
"""The Python of the base OS image (Debian bookworm's python3)."""
KEEP: Final = 3
"""Wheelhouses of each kind kept in the cache (the newest)."""
PIP_TIMEOUT_S: Final = 900.0


@dataclass(frozen=True)
class Wheelhouse:
    choir: Path
    """Directory holding choir's wheel."""
    deps: Path
    """Directory holding the dependencies' wheels."""
    key: str
    """Changes whenever any wheel does."""


def build_cache(home: ChoirHome) -> Path:
    explicit = os.environ.get(CACHE_ENV)
    return Path(explicit).expanduser().absolute() if explicit else home.root / "build"


def source_root() -> Path:
    """The source tree of the running choir (pyproject.toml next to the `choir` package)."""
    root = Path(choir.__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or 'name = "choir"' not in pyproject.read_text():
        raise ChoirError(
            f"choir's source tree is not at {root}: agent images are built from a source "
            "checkout; install choir with pip install -e <checkout>"
        )
    return root


def source_hash(root: Path) -> str:
    """SHA-256 over choir's package files and pyproject.toml (paths, modes, contents)."""
    digest = hashlib.sha256()
    for path in [root / "pyproject.toml", *_package_files(root / "choir")]:
        relative = path.relative_to(root).as_posix()
        mode = path.stat().st_mode & 0o111
        digest.update(f"{relative}\0{mode:o}\0".encode())
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def agent_requirements() -> list[str]:
    """choir-agent's dependencies with their own, pinned to the installed versions."""
    return list(_pinned_requirements())


@functools.cache
def _pinned_requirements() -> tuple[str, ...]:
    """Read once per process: installed versions change only with a reinstall (and restart)."""
    from packaging.requirements import Requirement  # only builds pay for the import
    from packaging.utils import canonicalize_name

    pinned: dict[str, str] = {}
    queue = [(Requirement(text), "") for text in _choir_requires()]
    while queue:
        requirement, extra = queue.pop()
        name = canonicalize_name(requirement.name)
        if name in HOST_ONLY or not _applies(requirement, extra) or name in pinned:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise ChoirError(
                f"{name} (a dependency of choir-agent) is not installed next to choird: "
                "reinstall choir (pip install -e <checkout>)"
            ) from None
        pinned[name] = dist.version
        for text in dist.requires or []:
            queue.extend((Requirement(text), wanted) for wanted in ("", *requirement.extras))
    return tuple(sorted(f"{name}=={version}" for name, version in pinned.items()))


def ensure_wheelhouse(home: ChoirHome) -> Wheelhouse:
    """Both wheel directories, built if missing (blocking: run it in a thread).

    `$CHOIR_WHEELHOUSE` names a ready-made one instead (`choir/` and `deps/` of wheels): for
    installs without a source tree, and for tests that must not see the source change.
    """
    given = os.environ.get(WHEELHOUSE_ENV)
    if given:
        return given_wheelhouse(Path(given).expanduser())
    cache = build_cache(home) / "wheels"
    root = source_root()
    choir_dir = cache / f"choir-{source_hash(root)[:16]}"
    if not choir_dir.is_dir():
        with _building(choir_dir) as staging:
            _build_choir_wheel(root, staging, build_cache(home))
    requirements = agent_requirements()
    deps_key = hashlib.sha256("\n".join([IMAGE_PYTHON, *requirements]).encode()).hexdigest()
    deps_dir = cache / f"deps-{deps_key[:16]}"
    if not deps_dir.is_dir():
        with _building(deps_dir) as staging:
            _download_deps(requirements, staging, build_cache(home))
    _prune(cache, "choir-", choir_dir)
    _prune(cache, "deps-", deps_dir)
    return Wheelhouse(choir_dir, deps_dir, f"{choir_dir.name}+{deps_dir.name}")


def given_wheelhouse(root: Path) -> Wheelhouse:
    """The wheelhouse at `root` (`choir/` and `deps/`), keyed by its wheels' names and bytes."""
    choir_dir, deps_dir = root / "choir", root / "deps"
    if not list(choir_dir.glob("choir-*.whl")) or not deps_dir.is_dir():
        raise ChoirError(
            f"${WHEELHOUSE_ENV} {root} is not a wheelhouse: it needs choir/choir-*.whl and deps/"
        )
    hasher = hashlib.sha256()
    for wheel in sorted([*choir_dir.glob("*.whl"), *deps_dir.glob("*.whl")]):
        hasher.update(wheel.name.encode() + b"\0" + wheel.read_bytes())
    return Wheelhouse(choir_dir, deps_dir, f"given-{hasher.hexdigest()[:16]}")


def _build_choir_wheel(root: Path, target: Path, cache: Path) -> None:
    """`pip wheel` of a snapshot of the source (the tree may change while pip reads it)."""
    with tempfile.TemporaryDirectory(prefix="choir-src-") as scratch:
        snapshot = Path(scratch)
        shutil.copy2(root / "pyproject.toml", snapshot)
        readme = root / "README.md"
        (snapshot / "README.md").write_bytes(readme.read_bytes() if readme.is_file() else b"")
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
        shutil.copytree(root / "choir", snapshot / "choir", ignore=ignore)
        _pip(cache, "wheel", "--no-deps", "--wheel-dir", str(target), str(snapshot))


def _download_deps(requirements: list[str], target: Path, cache: Path) -> None:
    platforms = [f"manylinux_2_{minor}_{platform.machine()}" for minor in range(36, 16, -1)]
    platforms += [f"manylinux2014_{platform.machine()}", f"linux_{platform.machine()}"]
    _pip(
        cache,
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        IMAGE_PYTHON,
        "--implementation",
        "cp",
        *[arg for tag in platforms for arg in ("--platform", tag)],
        "--dest",
        str(target),
        *requirements,
    )


def _pip(cache: Path, *args: str) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    command += ["--cache-dir", str(cache / "pip"), *args]
    try:
        subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=True,
            timeout=PIP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise ChoirError(f"pip {args[0]} timed out after {PIP_TIMEOUT_S:.0f} s") from None
    except subprocess.CalledProcessError as error:
        lines = (error.stderr or error.stdout or "").strip().splitlines()
        detail = lines[-1] if lines else f"exit status {error.returncode}"
        raise ChoirError(
            f"pip {args[0]} failed building the image's wheels: {detail} "
            "(the host needs access to a Python package index once per dependency change)"
        ) from None


@contextmanager
def _building(final: Path) -> Iterator[Path]:
    """A staging directory moved into place whole as `final` on success (concurrent builds race
    harmlessly: the first to finish wins, the other's copy is dropped)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=".building-"))
    try:
        yield staging
        if not final.exists():
            with contextlib.suppress(OSError):  # another build finished first
                staging.rename(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _prune(cache: Path, prefix: str, keep: Path) -> None:
    """Remove all but the newest `KEEP` directories of a kind (never `keep`)."""
    found = sorted(cache.glob(f"{prefix}*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [p for p in found if p != keep][KEEP - 1 :]:
        shutil.rmtree(old, ignore_errors=True)


def _package_files(package: Path) -> Iterator[Path]:
    for directory, dirs, files in os.walk(package, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.endswith(".egg-info"))
        for name in sorted(files):
            if not name.endswith(".pyc"):
                yield Path(directory) / name


def _choir_requires() -> list[str]:
    try:
        return importlib.metadata.distribution("choir").requires or []
    except importlib.metadata.PackageNotFoundError:
        raise ChoirError("choir is not installed: pip install -e <checkout>") from None


def _applies(requirement: Requirement, extra: str) -> bool:
    from packaging.markers import default_environment

    if requirement.marker is None:
        return True
    environment = {**default_environment(), "extra": extra, "python_version": IMAGE_PYTHON}
    return requirement.marker.evaluate(environment)  # type: ignore[arg-type]
