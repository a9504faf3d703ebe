"""`choir.tts.speak` through the official ElevenLabs client against a local server speaking its API
over real HTTP: the bound voice's settings sent, the audio staged whole in `.choirtmp/send/` as
OGG Opus (passed through, or PCM encoded with the real `opusenc`), never over an earlier file,
never outside the workspace, and refusals an error code the model can act on."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from choir.agent.integrations import tts
from choir.agent.integrations.tts import SpeakInput, is_ogg_opus
from choir.agent.kernel.workspace import Workspace
from choir.core.integrations import VoiceAccess, voice_access, withheld_tools
from choir.protocol.tooling.tools import ToolResult
from tests.harness.elevenlabs import ElevenLabsServer

KEY = "el-test-key"
SETTINGS = {
    "stability": 0.3,
    "similarity_boost": 0.8,
    "style": 0.1,
    "use_speaker_boost": True,
    "speed": 1.1,
}


@pytest.fixture
async def server() -> AsyncIterator[ElevenLabsServer]:
    async with ElevenLabsServer(KEY) as running:
        yield running


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "ws"
    root.mkdir()
    with Workspace(root) as ws:
        ws.ensure_choirtmp()
        yield ws


def voice(server: ElevenLabsServer, output_format: str = "opus_48000_64") -> VoiceAccess:
    data = {
        "bindings": {"voice_profile": "narrator"},
        "voice_profiles": {
            "narrator": {
                "tts": "eleven",
                "voice_id": "voice-rachel",
                "output_format": output_format,
                "voice_settings": SETTINGS,
            }
        },
        "tts": {
            "eleven": {
                "model_id": "eleven_multilingual_v2",
                "endpoint": server.endpoint,
                "secret": "el-key",
            }
        },
    }
    access = voice_access(data)
    assert isinstance(access, VoiceAccess)
    return access


async def say(
    server: ElevenLabsServer,
    workspace: Workspace,
    access: VoiceAccess | None = None,
    key: str = KEY,
    **call: str,
) -> ToolResult:
    arguments = {"text": "Good morning.", **call}
    return await tts.speak(
        access or voice(server), key, SpeakInput.model_validate(arguments), workspace, 10
    )


def staged(workspace: Workspace, result: ToolResult) -> bytes:
    return (workspace.root / result.data["path"]).read_bytes()


async def test_an_opus_voice_is_staged_whole_as_ogg_opus(
    server: ElevenLabsServer, workspace: Workspace
) -> None:
    result = await say(server, workspace, filename="hello.ogg")
    assert result.status == "success", result
    assert result.data["path"] == ".choirtmp/send/hello.ogg"
    assert is_ogg_opus(staged(workspace, result))
    [request] = server.requests
    assert (request.voice_id, request.output_format, request.key) == (
        "voice-rachel",
        "opus_48000_64",
        KEY,
    )
    assert request.body["text"] == "Good morning."
    assert request.body["model_id"] == "eleven_multilingual_v2"
    assert request.body["voice_settings"] == SETTINGS
    assert not [p for p in (workspace.root / ".choirtmp").iterdir() if p.name.endswith(".partial")]

    again = await say(server, workspace, filename="hello.ogg")  # the first is not sent yet
    assert again.data["path"] == ".choirtmp/send/hello-2.ogg"


async def test_pcm_is_encoded_to_ogg_opus_with_opusenc(
    server: ElevenLabsServer, workspace: Workspace
) -> None:
    result = await say(server, workspace, access=voice(server, "pcm_24000"))
    assert result.status == "success", result
    audio = staged(workspace, result)
    assert is_ogg_opus(audio)
    assert len(audio) > 1000  # real encoded audio, not just the headers


async def test_audio_nothing_here_can_encode_says_which_format_to_use(
    server: ElevenLabsServer, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no ffmpeg, no opusenc
    result = await say(server, workspace, access=voice(server, "mp3_44100_128"))
    assert result.error_code == "conversion_unavailable"
    assert "output_format to opus_48000_64" in result.summary
    assert not list((workspace.root / ".choirtmp" / "send").iterdir())


async def test_a_send_directory_symlinked_out_of_the_workspace_is_not_followed(
    server: ElevenLabsServer, workspace: Workspace, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    send = workspace.root / ".choirtmp" / "send"
    shutil.rmtree(send, ignore_errors=True)
    os.symlink(outside, send)
    result = await say(server, workspace)
    assert result.error_code == "path_outside_workspace", result
    assert not list(outside.iterdir())


@pytest.mark.parametrize(
    ("key", "voice_id", "fail", "code"),
    [
        ("wrong", "voice-rachel", None, "auth_failed"),
        (KEY, "voice-missing", None, "invalid_request"),
        (KEY, "voice-rachel", 429, "rate_limited"),
        (KEY, "voice-rachel", 503, "provider_error"),
    ],
)
async def test_refusals_name_what_to_do(
    server: ElevenLabsServer,
    workspace: Workspace,
    key: str,
    voice_id: str,
    fail: int | None,
    code: str,
) -> None:
    if fail is not None:
        server.fail_next(fail)
    access = replace(voice(server), voice_id=voice_id)
    result = await say(server, workspace, access=access, key=key)
    assert (result.status, result.error_code) == ("error", code), result
    assert key not in result.model_dump_json()


def test_speech_is_withheld_without_a_bound_voice_or_its_secret() -> None:
    assert "no voice profile is bound" in withheld_tools({}, frozenset())["choir.tts.speak"]
    data = {
        "bindings": {"voice_profile": "narrator"},
        "voice_profiles": {"narrator": {"tts": "eleven", "voice_id": "v"}},
        "tts": {"eleven": {"model_id": "m", "secret": "el-key"}},
    }
    assert "choirctl secret set el-key" in withheld_tools(data, frozenset())["choir.tts.speak"]
    assert "choir.tts.speak" not in withheld_tools(data, frozenset({"el-key"}))
    access = voice_access(data)
    assert isinstance(access, VoiceAccess)
    assert access.endpoint == "https://api.elevenlabs.io"  # the client adds /v1
