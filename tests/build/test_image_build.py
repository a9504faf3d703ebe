"""`agent build` against the real Docker engine (§17.3): base and agent images, labels, tags,
the baked `/choir`, no-op detection, failures that keep the previous image, stale remotes."""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import docker
import pytest

from choir.config import load_home
from choir.config.scaffolding.gitrepo import git
from choir.daemon.images.base import ensure_base_image
from choir.daemon.images.build import (
    KEEP_PREVIOUS,
    TOTAL_STEPS,
    BuildError,
    BuildProgress,
    ensure_agent_image,
)
from choir.errors import ConfigError, NotFoundError, UsageError
from choir.home import ChoirHome
from choir.protocol import VersionInfo
from tests.build.support import (
    agent_repo,
    bare_remote,
    commit,
    make_home,
    move_away,
    read_config,
    set_repo,
    skill,
    tool,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


class Recorder:
    def __init__(self) -> None:
        self.items: list[BuildProgress] = []

    def __call__(self, item: BuildProgress) -> None:
        self.items.append(item)

    def steps(self) -> list[int]:
        seen: list[int] = []
        for item in self.items:
            if item.log is None and (not seen or seen[-1] != item.step):
                seen.append(item.step)
        return seen

    def details(self, step: int) -> list[str]:
        return [i.detail for i in self.items if i.step == step and i.log is None and i.detail]

    def logs(self) -> list[str]:
        return [i.log for i in self.items if i.log is not None]


async def build(home: ChoirHome, agent_id: str, progress: Recorder | None = None):
    return await ensure_agent_image(home, load_home(home).config, agent_id, progress)


def run(client: docker.DockerClient, image: str, command: str) -> str:
    output = client.containers.run(image, ["sh", "-c", command], remove=True, network_mode="none")
    return output.decode()


async def test_a_full_build_bakes_the_merged_tree_and_labels_and_tags_the_image(
    build_home, docker_sdk
):
    home, agent_id = build_home
    progress = Recorder()

    ref = await build(home, agent_id, progress)

    assert ref.built is True
    assert progress.steps() == list(range(1, TOTAL_STEPS + 1))
    version = ref.version
    agent_commit = version.agent_repo_commit
    assert ref.tag == (
        f"choir-agent-{agent_id}:{agent_commit[:7]}-{version.global_repo_commit[:7]}"
    )
    assert version.image_version == ref.tag.split(":")[1]
    image = docker_sdk.images.get(ref.tag)
    assert image.id == ref.id
    labels = image.labels
    assert labels["choir.managed"] == "true"
    assert labels["choir.agent"] == agent_id
    assert labels["choir.role"] == "agent"
    assert labels["choir.home"] == str(home.root)
    assert labels["choir.image_version"] == version.image_version
    assert (labels["choir.global_commit"], labels["choir.agent_commit"]) == (
        version.global_repo_commit,
        agent_commit,
    )
    assert len(labels["choir.input"]) == 32
    baked = VersionInfo.model_validate_json(run(docker_sdk, ref.tag, "cat /choir/version.json"))
    assert baked == version
    listing = run(
        docker_sdk,
        ref.tag,
        "cd /choir && ls tools/global | wc -l && ls tools/agent | wc -l && ls skills && "
        "ls USER.md SOUL.md SOUL-CORE.md && readlink bin/git-cred-helper",
    ).split()
    seeded_tools = len(list((Path(__file__).parents[2] / "seeds/global/tools").glob("*.json")))
    assert listing == [
        str(seeded_tools),
        "0",
        "skill-builder.json",
        "tool-builder.json",
        "SOUL-CORE.md",
        "SOUL.md",
        "USER.md",
        "/opt/choir/bin/choir-agent",
    ]
    python = run(docker_sdk, ref.tag, "python3 -c 'import choir, choir.agent.app; print(1)'")
    assert python.strip() == "1"


async def test_a_build_with_nothing_changed_is_a_no_op_found_by_its_labels(build_home):
    home, agent_id = build_home
    first = await build(home, agent_id)
    progress = Recorder()

    started = time.perf_counter()
    again = await build(home, agent_id, progress)
    elapsed = time.perf_counter() - started

    assert again.built is False
    assert (again.id, again.tag, again.version) == (first.id, first.tag, first.version)
    assert progress.logs() == [], "no docker build ran"
    assert progress.details(6) == [f"up to date: {first.tag}"]
    assert progress.steps() == list(range(1, TOTAL_STEPS + 1))
    assert elapsed < 2.0, f"a no-op build took {elapsed:.2f} s"


PARSED_AT_START = """
import choir.protocol.docstrings as docstrings
parsed = []
parse = docstrings._parsed
docstrings._parsed = lambda filename: (parsed.append(filename), parse(filename))[1]
import choir.agent.app as app
app.import_after_hello()
print(len(parsed), parsed[:3])
"""


async def test_an_agent_container_parses_no_source_file_for_its_models(build_home, docker_sdk):
    """The image's build loads everything choir-agent loads to serve, so the field docstrings of
    its wire and config models are cached beside their bytecode: a container, whose filesystem
    is read-only, reads them instead of parsing each model's source at every start."""
    home, agent_id = build_home
    ref = await build(home, agent_id)
    output = docker_sdk.containers.run(
        ref.tag,
        ["python3", "-c", PARSED_AT_START],
        remove=True,
        network_mode="none",
        read_only=True,
    )
    assert output.decode().strip() == "0 []"


async def test_agent_overrides_reach_the_image_and_user_md_stays_global(build_home, docker_sdk):
    home, agent_id = build_home
    repo = agent_repo(home, agent_id)
    commit(
        repo,
        {
            "identity/SOUL.md": "agent soul\n",
            "identity/USER.md": "not used\n",
            "tools/choir.fs.read.json": None,
            "tools/test.mine.json": tool("test.mine"),
            "skills/tool-builder.json": skill("tool-builder", "the agent's own tool builder"),
        },
    )

    ref = await build(home, agent_id)

    out = run(
        docker_sdk,
        ref.tag,
        "cat /choir/SOUL.md; ls /choir/tools/agent; "
        "python3 -c \"import json; print(json.load(open('/choir/skills/tool-builder.json'))"
        "['description'])\"",
    ).splitlines()
    assert out == ["agent soul", "test.mine.json", "the agent's own tool builder"]
    global_user = (Path(__file__).parents[2] / "seeds/global/identity/USER.md").read_text()
    assert run(docker_sdk, ref.tag, "cat /choir/USER.md") == global_user


async def test_a_change_rebuilds_under_a_new_tag_and_keeps_the_previous_image(
    build_home, docker_sdk
):
    home, agent_id = build_home
    first = await build(home, agent_id)
    new_commit = commit(agent_repo(home, agent_id), {"tools/test.added.json": tool("test.added")})

    second = await build(home, agent_id)

    assert second.built is True
    assert second.id != first.id
    assert second.version.agent_repo_commit == new_commit
    assert second.tag.endswith(f":{new_commit[:7]}-{first.version.global_repo_commit[:7]}")
    assert second.version.tool_manifest_hash != first.version.tool_manifest_hash
    assert docker_sdk.images.get(first.tag).id == first.id, "the previous image stays"


async def test_two_homes_with_one_agent_id_never_prune_each_others_images(
    build_home, tmp_path, docker_sdk
):
    home, agent_id = build_home
    other, _ = make_home(tmp_path / "other", agent_id=agent_id)
    set_repo(other, None, read_config(home)["global_repo"]["url"])
    theirs = await build(other, agent_id)

    for n in range(KEEP_PREVIOUS + 2):  # enough rebuilds to prune this home's oldest image
        commit(agent_repo(home, agent_id), {f"tools/test.n{n}.json": tool(f"test.n{n}")})
        await build(home, agent_id)

    assert docker_sdk.images.get(theirs.tag).id == theirs.id
    assert docker_sdk.images.get(theirs.id).labels["choir.home"] == str(other.root)


async def test_uncommitted_work_in_a_local_repo_is_built_and_marked_dirty(build_home, docker_sdk):
    home, agent_id = build_home
    repo = agent_repo(home, agent_id)
    (repo / "identity" / "SOUL.md").write_text("work in progress\n")

    ref = await build(home, agent_id)

    assert ref.tag.endswith("-dirty")
    assert ref.version.agent_repo_commit.endswith("+dirty")
    assert run(docker_sdk, ref.tag, "cat /choir/SOUL.md") == "work in progress\n"


async def test_a_failing_build_shows_the_log_tail_and_leaves_the_previous_image(
    build_home, docker_sdk
):
    home, agent_id = build_home
    good = await build(home, agent_id)
    repo = agent_repo(home, agent_id)
    commit(repo, {"Dockerfile": "FROM choir-base\nRUN echo choir-test-boom && false\n"})
    progress = Recorder()

    with pytest.raises(BuildError) as raised:
        await build(home, agent_id, progress)

    message = str(raised.value)
    assert message.startswith("docker build failed: The command ")
    assert f"{good.tag} is still the image to run" in message
    assert "last lines of the build:" in message
    assert "  | choir-test-boom" in message
    assert any("choir-test-boom" in line for line in raised.value.log_tail)
    assert any("choir-test-boom" in line for line in progress.logs()), "output was streamed"
    assert docker_sdk.images.get(good.tag).id == good.id
    tags = {
        t
        for i in docker_sdk.images.list(
            filters={"label": [f"choir.agent={agent_id}", f"choir.home={home.root}"]}
        )
        for t in i.tags
    }
    assert tags == {good.tag}, "nothing was tagged for the failed build"


async def test_invalid_manifests_are_refused_before_docker_builds_anything(build_home, docker_sdk):
    home, agent_id = build_home
    commit(agent_repo(home, agent_id), {"tools/test.bad.json": '{"llm": {}}'})
    progress = Recorder()

    with pytest.raises(ConfigError) as raised:
        await build(home, agent_id, progress)

    assert raised.value.problems[0].startswith("tools/agent/test.bad.json: ")
    assert max(progress.steps()) == 3, "refused before the base image step"
    assert docker_sdk.images.list(filters={"label": f"choir.agent={agent_id}"}) == []


async def test_an_agent_dockerfile_not_from_choir_base_is_refused(build_home):
    home, agent_id = build_home
    commit(agent_repo(home, agent_id), {"Dockerfile": "FROM debian:bookworm-slim\n"})

    with pytest.raises(ConfigError, match=r"the agent repo's Dockerfile is invalid: fix it"):
        await build(home, agent_id)


async def test_an_unreachable_agent_remote_builds_from_the_stale_clone_with_a_warning(
    build_home, tmp_path
):
    home, agent_id = build_home
    remote = tmp_path / "agent.git"
    set_repo(home, agent_id, bare_remote(agent_repo(home, agent_id), remote))
    first = await build(home, agent_id)
    move_away(remote)
    progress = Recorder()

    again = await build(home, agent_id, progress)

    assert (again.built, again.id) == (False, first.id)
    warning = progress.details(3)[-1]
    assert warning.startswith(f"file://{remote} at {first.version.agent_repo_commit[:7]}; ")
    assert "warning: fetch from file://" in warning
    assert "using the stale clone" in warning


async def test_unknown_agents_and_missing_base_os_images_are_refused(build_home, engine):
    home, agent_id = build_home

    with pytest.raises(NotFoundError, match=r"no agent named 'ghost' in the config \(known: "):
        await build(home, "ghost")
    config = load_home(home).config
    config.agents["trailing-"] = config.agents[agent_id]
    with pytest.raises(UsageError, match=r"agent id 'trailing-' cannot name a docker image"):
        await ensure_agent_image(home, config, "trailing-")
    with pytest.raises(UsageError, match=r"the base OS image choir-test-missing:none is not in"):
        await ensure_base_image(
            engine,
            home,
            dockerfile_text="FROM ${BASE_IMAGE}\n",
            base_os="choir-test-missing:none",
            global_commit="0" * 40,
        )


async def test_the_base_image_is_reused_and_rebuilt_only_when_the_global_repo_moves(
    build_home, tmp_path
):
    home, agent_id = build_home
    first = await build(home, agent_id)
    progress = Recorder()
    await build(home, agent_id, progress)
    assert progress.details(4)[-1].startswith("up to date: choir-base:")

    global_work = tmp_path / "global-work"
    git(tmp_path, "clone", "--quiet", load_home(home).config.global_repo.url, str(global_work))
    commit(global_work, {"identity/USER.md": "a new user\n"})
    remote = tmp_path / "own-global.git"
    set_repo(home, None, bare_remote(global_work, remote))
    moved = Recorder()
    second = await build(home, agent_id, moved)

    assert moved.details(4)[-1].startswith("built choir-base:")
    assert second.version.global_repo_commit != first.version.global_repo_commit
    assert second.id != first.id


async def test_layers_of_a_build_in_flight_are_never_taken_for_the_base_nor_pruned(
    build_home, docker_sdk
):
    """Every layer of a running agent build inherits the base's labels; a parallel build (of
    another home on the same engine) must neither prune such a layer nor adopt it as its base
    (CI once failed with `No such image` mid-build)."""
    home, agent_id = build_home
    first = await build(home, agent_id)
    base_id = docker_sdk.images.get(first.id).labels["choir.base"]
    base_tag = docker_sdk.images.get(base_id).tags[0]
    layers = []
    try:
        for n in range(KEEP_PREVIOUS + 2):
            dockerfile = f"FROM {base_tag}\nRUN echo {agent_id}-{n} > /layer\n".encode()
            image, _ = docker_sdk.images.build(fileobj=io.BytesIO(dockerfile), rm=True)
            assert image.labels["choir.role"] == "base", "the layer looks like a base image"
            layers.append(image.id)
        commit(agent_repo(home, agent_id), {"tools/test.added.json": tool("test.added")})

        second = await build(home, agent_id)  # a rebuild prunes old bases

        assert second.built is True
        assert docker_sdk.images.get(second.id).labels["choir.base"] == base_id
        for layer in layers:
            assert docker_sdk.images.get(layer).id == layer, "an in-flight layer was pruned"
    finally:
        for layer in layers:
            with contextlib.suppress(docker.errors.APIError):
                docker_sdk.images.remove(layer, force=True)
