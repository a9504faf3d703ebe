"""`agent build` (§17.3): the agent's image, built only when something it is made of changed.

`ensure_agent_image` is the one entry point: `choirctl agent build` (the `agent.build` verb),
`agent update`, `choir up` and the docker runtime's start all call it. It answers an `ImageRef`
naming the image to run; `built` says whether a docker build ran or the image was up to date.

The ten steps of §17.3, in order, each reported through `progress`. Everything is read and
checked before docker is asked to build anything: the repos are fetched, the `/choir` tree is
merged and its tools, skills and both Dockerfiles validated first. The agent image's context —
the agent repo, the merged tree and the generated Dockerfile (the repo's own, pinned to the base
image just built, plus the `/choir` bake) — is a deterministic tar; its hash and the base
image's id label the image, so "nothing changed" is one label query: no docker build runs and a
no-op build takes a fraction of a second. Tags move only after a successful build, so a failed
build leaves the previous image usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from choir.adapters.docker.engine import BuildFailed, DockerEngine, ImageInfo
from choir.config import ChoirConfig
from choir.daemon.images import dockerfile, repos
from choir.daemon.images.agent_tree import materialize
from choir.daemon.images.base import (
    MANAGED,
    BaseImage,
    base_dockerfile,
    base_images,
    ensure_base_image,
)
from choir.daemon.images.context import TarContext, digest
from choir.daemon.images.kept import VERSION_LABEL
from choir.errors import ChoirError, ConfigError, NotFoundError, UsageError
from choir.home import ChoirHome
from choir.logs import get_logger
from choir.protocol import VersionInfo

log = get_logger("choird.build")

TOTAL_STEPS: Final = 10
"""§17.3 has ten steps; progress counts them."""
SHOWN_TAIL: Final = 15
"""Lines of a failed build's output its error message ends with."""
KEEP_PREVIOUS: Final = 1
"""Older images of an agent (and older base images) kept after a build, to go back to."""
AGENT_REPOSITORY: Final = "choir-agent-{agent_id}"
_REPOSITORY_NAME: Final = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
"""A docker repository path component (the distribution reference grammar)."""
CONTEXT_DIR: Final = ".choir"
"""Where the generated Dockerfile and the merged tree sit in the agent image's context."""
BAKE: Final = (
    f"\n# added by choirctl agent build (§17.3 step 7)\nCOPY {CONTEXT_DIR}/tree/ /choir/\n"
)


@dataclass(frozen=True)
class ImageRef:
    """An agent image ready to run."""

    tag: str
    """`choir-agent-<id>:<image_version>`."""
    id: str
    """The docker image id (`sha256:…`)."""
    version: VersionInfo
    """The version.json baked into the image, which INIT_HELLO must match."""
    built: bool
    """False when the image was already up to date and no docker build ran."""


@dataclass(frozen=True)
class BuildProgress:
    """One progress item: a §17.3 step starting, or a line of docker build output."""

    step: int
    """1..TOTAL_STEPS."""
    title: str
    """What the step does."""
    detail: str = ""
    """What it found or decided (e.g. `up to date`)."""
    log: str | None = None
    """A line of docker build output, when this item is one."""


Progress = Callable[[BuildProgress], None]
"""Receives progress items on the event loop's thread."""


class BuildError(ChoirError):
    """A build failed; `log_tail` holds the last lines of the docker build output, and the
    message ends with them, so every caller (CLI, update, TUI) shows why."""

    def __init__(self, message: str, log_tail: list[str] | None = None) -> None:
        self.log_tail = log_tail or []
        shown = [f"  | {line}" for line in self.log_tail[-SHOWN_TAIL:]]
        super().__init__(
            "\n".join([message, *(["last lines of the build:", *shown] if shown else [])])
        )


@dataclass(frozen=True)
class _Prepared:
    """Steps 1 to 3 and 5 done: what the images are made of, all of it checked."""

    checkouts: tuple[repos.RepoCheckout, repos.RepoCheckout]
    version: VersionInfo
    base_dockerfile: str
    agent_dockerfile: str
    context: TarContext
    """The agent repo and the merged tree; the Dockerfile is added once the base is known."""
    counts: str


async def ensure_agent_image(
    home: ChoirHome,
    config: ChoirConfig,
    agent_id: str,
    progress: Progress | None = None,
    *,
    engine: DockerEngine | None = None,
    agent_commit: str | None = None,
) -> ImageRef:
    """Fetch the agent's repos, build the base and agent images if needed; the image to run.

    Validates everything (manifests, skills, Dockerfiles) before any docker build. A failing
    build raises `BuildError` with the log tail and leaves the previous image tagged. `engine`
    is borrowed when given; otherwise one is connected for this call. `agent_commit` builds
    that commit of the agent repo instead of its ref (`agent rollback --to <commit>`).
    """
    report = _Reporter(progress)
    report.step(1, "read the agent definition", f"{agent_id} from config.json")
    if agent_id not in config.agents:
        known = ", ".join(sorted(config.agents)) or "none configured"
        raise NotFoundError(f"no agent named {agent_id!r} in the config (known: {known})")
    if not _REPOSITORY_NAME.fullmatch(AGENT_REPOSITORY.format(agent_id=agent_id)):
        raise UsageError(
            f"agent id {agent_id!r} cannot name a docker image (choir-agent-<id>): docker wants "
            "it to end with a letter or digit and not to repeat '-' '_' runs; rename the agent"
        )
    owned = engine is None
    engine = engine or await DockerEngine.connect()
    try:
        lock = _lock(home, agent_id)
        async with lock:
            return await _build(engine, home, config, agent_id, report, agent_commit)
    finally:
        if owned:
            engine.close()


async def _build(
    engine: DockerEngine,
    home: ChoirHome,
    config: ChoirConfig,
    agent_id: str,
    report: _Reporter,
    agent_commit: str | None,
) -> ImageRef:
    prepared = await asyncio.to_thread(_prepare, home, config, agent_id, report, agent_commit)
    report.step(4, "base image (Dockerfile.base)", "")
    async with _lock(home, None):
        try:
            base = await ensure_base_image(
                engine,
                home,
                dockerfile_text=prepared.base_dockerfile,
                base_os=config.container.base_image,
                global_commit=prepared.version.global_repo_commit,
                on_line=report.log_line(4),
                on_note=lambda note: report.step(4, "base image (Dockerfile.base)", note),
            )
        except BuildFailed as failed:
            raise BuildError(f"base image: {failed.message}", failed.log_tail) from None
    report.step(4, "base image (Dockerfile.base)", _base_detail(base))
    report.step(5, "merge tools, skills and identity", prepared.counts)
    agent_file = dockerfile.pin_base(prepared.agent_dockerfile, base.tag) + BAKE
    prepared.context.add_bytes(f"{CONTEXT_DIR}/Dockerfile", agent_file.encode())
    context = await asyncio.to_thread(prepared.context.data)
    key = digest(base.id, context)[:32]
    version = prepared.version
    tag = f"{AGENT_REPOSITORY.format(agent_id=agent_id)}:{version.image_version}"
    labels = _labels(home, agent_id, key, base, version)
    mine = {**MANAGED, "choir.agent": agent_id, "choir.home": str(home.root)}
    found = await engine.images({**mine, "choir.input": key})
    if found:
        report.step(6, "agent image (the agent repo's Dockerfile)", f"up to date: {tag}")
        image_id, built = found[0].id, False
    else:
        report.step(6, "agent image (the agent repo's Dockerfile)", f"building FROM {base.tag}")
        image_id, built = await _docker_build(engine, agent_id, context, labels, report), True
    report.step(7, "bake /choir and version.json", _versions(version))
    if not found or tag not in found[0].tags:
        await engine.tag(image_id, tag)
    report.step(8, "tag", tag)
    if built:
        await _prune(await engine.images(mine), engine, keep=image_id)
        await _prune(await base_images(engine), engine, keep=base.id)
    report.step(9, "store", "local image cache only (no registry)")
    await asyncio.to_thread(note_latest_image, home, agent_id, image_id)
    report.step(10, "done", f"not started: choirctl agent start|update {agent_id}")
    log.info(
        "agent image ready",
        fields={"agent_id": agent_id, "tag": tag, "built": built, "image_id": image_id},
    )
    return ImageRef(tag, image_id, version, built)


def latest_image_file(home: ChoirHome, agent_id: str) -> Path:
    """Holds the id of the image this home's latest build made ready for the agent: a start
    compares its own with it (a file read) instead of listing images (a scan of every image on
    the engine, seconds on a host with hundreds)."""
    return home.root / "runtime" / agent_id / "image-id"


def note_latest_image(home: ChoirHome, agent_id: str, image_id: str) -> None:
    path = latest_image_file(home, agent_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(image_id)
    partial.replace(path)  # whole or not at all: a start never reads half an id


def _prepare(
    home: ChoirHome,
    config: ChoirConfig,
    agent_id: str,
    report: _Reporter,
    agent_commit: str | None = None,
) -> _Prepared:
    """Steps 2, 3 and 5 (blocking): fetch, merge and validate; nothing built yet."""
    agent_key = repos.repo_key(agent_id)
    agent_ref = config.agents[agent_id].repo
    if agent_commit is not None:
        agent_ref = repos.at_commit(agent_ref, agent_commit)
    with (
        repos.clone_lock(repos.clone_path(home, repos.GLOBAL)),
        repos.clone_lock(repos.clone_path(home, agent_key)),
    ):
        report.step(2, "fetch the global repo", "")
        global_repo = repos.checkout(home, repos.GLOBAL, config.global_repo)
        report.step(2, "fetch the global repo", _checkout_detail(global_repo))
        report.step(3, "fetch the agent repo", "")
        agent_repo = repos.checkout(home, agent_key, agent_ref)
        report.step(3, "fetch the agent repo", _checkout_detail(agent_repo))
        return _merge(agent_id, global_repo, agent_repo)


def _merge(
    agent_id: str, global_repo: repos.RepoCheckout, agent_repo: repos.RepoCheckout
) -> _Prepared:
    base_text, _ = base_dockerfile(global_repo.path)
    agent_text = agent_dockerfile(agent_repo.path)
    image_version = _image_version(global_repo.commit, agent_repo.commit)
    with tempfile.TemporaryDirectory(prefix=f"choir-build-{agent_id}-") as scratch:
        tree = Path(scratch) / "tree"
        version = materialize(
            global_repo.path,
            agent_repo.path,
            tree,
            agent_id=agent_id,
            image_version=image_version,
            commits=(global_repo.commit, agent_repo.commit),
        )
        context = TarContext()
        context.add_tree("", agent_repo.path)
        if any(name.startswith(f"{CONTEXT_DIR}/") for name in context.names()):
            raise ConfigError(
                [f"the agent repo has a {CONTEXT_DIR}/ directory, which agent build reserves"],
                header="rename or remove it",
            )
        context.add_tree(f"{CONTEXT_DIR}/tree", tree)
        counts = _counts(tree)
    return _Prepared((global_repo, agent_repo), version, base_text, agent_text, context, counts)


def agent_dockerfile(agent_repo: Path) -> str:
    """The agent repo's Dockerfile, checked; `ConfigError` naming every problem."""
    path = agent_repo / "Dockerfile"
    if not path.is_file():
        raise ConfigError(
            [f"{agent_repo}: no Dockerfile: add one starting FROM {dockerfile.BASE_REPOSITORY}"],
            header="the agent repo cannot be built:",
        )
    text = path.read_text(encoding="utf-8")
    found = dockerfile.problems(text, agent=True)
    if found:
        raise ConfigError(
            [f"Dockerfile: {problem}" for problem in found],
            header="the agent repo's Dockerfile is invalid: fix it",
        )
    return text


async def _docker_build(
    engine: DockerEngine,
    agent_id: str,
    context: bytes,
    labels: dict[str, str],
    report: _Reporter,
) -> str:
    try:
        return await engine.build(
            context,
            dockerfile=f"{CONTEXT_DIR}/Dockerfile",
            labels=labels,
            on_line=report.log_line(6),
        )
    except BuildFailed as failed:
        mine = {**MANAGED, "choir.agent": agent_id, "choir.home": labels["choir.home"]}
        previous = await engine.images(mine)
        kept = next((tag for image in previous for tag in image.tags), None)
        still = f"; {kept} is still the image to run" if kept else ""
        raise BuildError(f"{failed.message}{still}", failed.log_tail) from None


async def _prune(found: list[ImageInfo], engine: DockerEngine, *, keep: str) -> None:
    """Remove all but `keep` and the newest `KEEP_PREVIOUS` other images of `found` (newest
    first); images a container or another image still uses stay (docker refuses, and that is
    fine)."""
    images = [image for image in found if image.id != keep]
    for image in images[KEEP_PREVIOUS:]:
        with contextlib.suppress(ChoirError):
            await engine.remove_image(image.id)


def _image_version(global_commit: str, agent_commit: str) -> str:
    """`<agent short>-<global short>`, with `-dirty` when a local tree has uncommitted work."""
    short = [commit.removesuffix("+dirty")[:7] for commit in (agent_commit, global_commit)]
    dirty = any(commit.endswith("+dirty") for commit in (agent_commit, global_commit))
    return "-".join(short) + ("-dirty" if dirty else "")


def _labels(
    home: ChoirHome, agent_id: str, key: str, base: BaseImage, version: VersionInfo
) -> dict[str, str]:
    return {
        **MANAGED,
        # Two homes on one engine (or parallel test runs) must never prune each other's images.
        "choir.home": str(home.root),
        "choir.role": "agent",  # images inherit labels: never pass for the base it is FROM
        "choir.agent": agent_id,
        "choir.input": key,
        "choir.base": base.id,
        "choir.image_version": version.image_version,
        "choir.global_commit": version.global_repo_commit,
        "choir.agent_commit": version.agent_repo_commit,
        VERSION_LABEL: version.model_dump_json(),  # what `agent rollback` starts it with
    }


def _checkout_detail(checkout: repos.RepoCheckout) -> str:
    where = f"{checkout.path} (working tree)" if checkout.local else checkout.url
    dirty = "+dirty" if checkout.commit.endswith("+dirty") else ""
    detail = f"{where} at {checkout.commit[:7]}{dirty}"
    return f"{detail}; warning: {checkout.warning}" if checkout.warning else detail


def _base_detail(base: BaseImage) -> str:
    return f"built {base.tag}" if base.built else f"up to date: {base.tag}"


def _versions(version: VersionInfo) -> str:
    return (
        f"global {version.global_repo_commit[:7]}, agent {version.agent_repo_commit[:7]}, "
        f"tools {version.tool_manifest_hash[:12]}, skills {version.skill_manifest_hash[:12]}"
    )


def _counts(tree: Path) -> str:
    global_tools = len(list((tree / "tools" / "global").glob("*.json")))
    agent_tools = len(list((tree / "tools" / "agent").glob("*.json")))
    skills = len(list((tree / "skills").glob("*.json")))
    identity = [name for name in ("USER.md", "SOUL.md", "SOUL-CORE.md") if (tree / name).is_file()]
    return (
        f"{global_tools} global + {agent_tools} agent tools, {skills} skills, "
        f"identity {', '.join(identity) or 'none'}"
    )


class _Reporter:
    """Sends progress items to the caller on the event loop's thread, from any thread."""

    def __init__(self, progress: Progress | None) -> None:
        self._progress = progress
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()

    def step(self, step: int, title: str, detail: str) -> None:
        self._send(BuildProgress(step, title, detail))

    def log_line(self, step: int) -> Callable[[str], None]:
        return lambda line: self._send(BuildProgress(step, "docker build", log=line))

    def _send(self, item: BuildProgress) -> None:
        if self._progress is None:
            return
        if threading.get_ident() == self._thread:
            self._progress(item)
        else:
            self._loop.call_soon_threadsafe(self._progress, item)


_LOCKS: dict[tuple[int, Path, str | None], asyncio.Lock] = {}


def _lock(home: ChoirHome, agent_id: str | None) -> asyncio.Lock:
    """One build per agent (and one base build) at a time, per event loop."""
    key = (id(asyncio.get_running_loop()), home.root, agent_id)
    return _LOCKS.setdefault(key, asyncio.Lock())
