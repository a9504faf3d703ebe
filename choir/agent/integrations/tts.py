"""`choir.tts.speak` (§8.7, §18.3, §21.3): the bound voice says a text; an OGG Opus voice message
is staged in `.choirtmp/send/` for the DM to deliver.

The voice profile is resolved at each call (a `voice set` or `config apply` reaches the next
one). ElevenLabs is asked through its official client in the profile's `output_format`; what
comes back is made OGG Opus, the format of a Telegram voice message: Ogg Opus passes as it is,
raw PCM (`pcm_<rate>`) is encoded with `opusenc` (opus-tools), anything else (mp3, μ-law) with
`ffmpeg` when the agent has it — without it the call says which `output_format` to use instead.
The file appears in `send/` whole (written beside it, then renamed), so nothing delivers half of
it.

A successful call's result carries what it was billed (issue 19): the characters spoken, the
provider's model and their cost at the provider's `price` (null: unknown, never 0). choird
stores it as the call's usage row when the result is durable (`choir.store.usage`), and the
agent's spend meter adds the cost (`choir.agent.lanes.spend`).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Mapping
from typing import Any, Final

import httpx
from pydantic import BaseModel, ConfigDict, Field

from choir.agent.kernel.workspace import PathOutsideWorkspace, Workspace
from choir.core.integrations import TTS_SPEAK, VoiceAccess
from choir.protocol.tooling.tools import ToolResult

TOOL: Final = TTS_SPEAK
SEND_DIR: Final = ".choirtmp/send"
OPUS_BITRATE: Final = "64"
"""kbit/s of an encoded voice message: clear speech, small files."""
_CONVERT_TIMEOUT_S: Final = 30.0


class SpeakInput(BaseModel):
    """The call's arguments (already checked against the manifest's JSON schema)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1, max_length=5000)
    filename: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]{1,100}$")


def is_ogg_opus(audio: bytes) -> bool:
    """Whether `audio` is an Ogg stream whose first packet is an Opus header."""
    return audio[:4] == b"OggS" and b"OpusHead" in audio[:80]


def voice_file_name(call: SpeakInput, now: float) -> str:
    """The staged file's name: the caller's (given `.ogg`), else one from the time."""
    if call.filename:
        stem = call.filename.removesuffix(".ogg").removesuffix(".oga").strip(".") or "speech"
        return f"{stem}.ogg"
    return time.strftime("speech-%Y%m%d-%H%M%S.ogg", time.gmtime(now))


def pcm_rate(output_format: str) -> int | None:
    """The sample rate of a raw PCM output format (`pcm_24000` → 24000), else None."""
    kind, _, rate = output_format.partition("_")
    return int(rate) if kind == "pcm" and rate.isdigit() else None


def price_per_million(data: Mapping[str, Any], voice: VoiceAccess) -> float | None:
    """`tts.<provider>.price.characters` of the voice's provider in the dynamic config `data`
    (USD per million characters); None when no price is configured."""
    profiles, providers = data.get("voice_profiles"), data.get("tts")
    profile = profiles.get(voice.profile) if isinstance(profiles, Mapping) else None
    name = profile.get("tts") if isinstance(profile, Mapping) else None
    provider = providers.get(name) if isinstance(providers, Mapping) and name else None
    price = provider.get("price") if isinstance(provider, Mapping) else None
    per_million = price.get("characters") if isinstance(price, Mapping) else None
    if isinstance(per_million, bool) or not isinstance(per_million, int | float):
        return None
    return float(per_million) if per_million >= 0 else None


def billed(call: SpeakInput, voice: VoiceAccess, per_million: float | None) -> dict[str, Any]:
    """What a successful call was billed: its usage fields in the result's data."""
    characters = len(call.text)
    cost = None if per_million is None else characters * per_million / 1_000_000
    return {
        "characters": characters,
        "model_id": voice.model_id,
        "cost_usd": cost,
        "cost_source": None if cost is None else "price",
    }


async def speak(
    voice: VoiceAccess,
    key: str,
    call: SpeakInput,
    workspace: Workspace,
    timeout_s: float,
    per_million: float | None = None,
) -> ToolResult:
    """Synthesize `call.text` with `voice` (API key `key`) into `<workspace>/.choirtmp/send/`;
    `per_million` is the provider's price per million characters (None: unknown)."""
    from elevenlabs.client import AsyncElevenLabs
    from elevenlabs.core.api_error import ApiError
    from elevenlabs.types import VoiceSettings

    audio = bytearray()
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            client = AsyncElevenLabs(api_key=key, base_url=voice.endpoint, httpx_client=http)
            async for chunk in client.text_to_speech.convert(
                voice.voice_id,
                text=call.text,
                model_id=voice.model_id,
                output_format=voice.output_format,
                voice_settings=VoiceSettings(**dict(voice.voice_settings)),
            ):
                audio += chunk
    except ApiError as error:
        return _refused(error, voice)
    except httpx.TimeoutException:
        return ToolResult.fail(
            "timeout", "the TTS provider did not answer in time; try again later"
        )
    except httpx.HTTPError as error:
        return ToolResult.fail(
            "unreachable", f"the TTS provider cannot be reached ({type(error).__name__})"
        )
    usage = billed(call, voice, per_million)  # billed once the provider answered
    voice_message = await to_ogg_opus(bytes(audio), voice.output_format)
    if isinstance(voice_message, ToolResult):
        return _with(voice_message, usage)
    name = voice_file_name(call, time.time())
    try:
        staged = await asyncio.to_thread(_stage, workspace, name, voice_message)
    except PathOutsideWorkspace as error:
        return ToolResult.fail("path_outside_workspace", error.message, **usage)
    except OSError as error:
        why = f"the voice message cannot be staged in {SEND_DIR}: {error.strerror}"
        return ToolResult.fail("write_failed", why, **usage)
    return ToolResult.ok(
        f"voice message staged as {staged} ({len(voice_message) // 1024 or 1} KiB)",
        path=staged,
        bytes=len(voice_message),
        voice_profile=voice.profile,
        **usage,
    )


def _with(result: ToolResult, usage: dict[str, Any]) -> ToolResult:
    """`result` with the call's usage: a call the provider answered is billed, whatever next."""
    return result.model_copy(update={"data": {**result.data, **usage}})


async def to_ogg_opus(audio: bytes, output_format: str) -> bytes | ToolResult:
    """`audio` (in `output_format`) as OGG Opus; an error result when it cannot be made so."""
    if is_ogg_opus(audio):
        return audio
    rate = pcm_rate(output_format)
    if rate is not None:
        command = ["opusenc", "--quiet", "--raw", f"--raw-rate={rate}", "--raw-chan=1"]
        command += ["--bitrate", OPUS_BITRATE, "-", "-"]
        tool = "opusenc (opus-tools)"
    else:
        command = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", "pipe:0"]
        command += ["-c:a", "libopus", "-b:a", f"{OPUS_BITRATE}k", "-f", "ogg", "pipe:1"]
        tool = "ffmpeg"
    if shutil.which(command[0]) is None:
        return ToolResult.fail(
            "conversion_unavailable",
            f"the TTS provider sent {output_format} audio and this agent has no {tool} to make "
            "it OGG Opus: the operator sets the voice profile's output_format to opus_48000_64",
        )
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(_CONVERT_TIMEOUT_S):
            out, err = await process.communicate(audio)
    except TimeoutError:
        process.kill()
        await process.wait()
        return ToolResult.fail("conversion_failed", f"{tool} took too long to encode the audio")
    if process.returncode != 0 or not is_ogg_opus(out):
        detail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return ToolResult.fail(
            "conversion_failed", f"{tool} could not encode the {output_format} audio: {detail[0]}"
        )
    return out


def _stage(workspace: Workspace, name: str, audio: bytes) -> str:
    """Write `audio` as `.choirtmp/send/<name>`, whole or not at all, confined to the workspace
    (its directories opened beneath the root: a symlink cannot lead the file elsewhere); the
    staged file's workspace path."""
    tmp_fd = workspace.open_dir(".choirtmp", create=True)
    send_fd = workspace.open_dir(SEND_DIR, create=True)
    try:
        partial = f".{name}.{os.getpid()}.partial"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, dir_fd=tmp_fd)
        with os.fdopen(fd, "wb") as out:
            out.write(audio)
            out.flush()
            os.fsync(out.fileno())
        stem, n = name.removesuffix(".ogg"), 1
        while _exists(send_fd, name):  # never replace a message not delivered yet
            n += 1
            name = f"{stem}-{n}.ogg"
        os.rename(partial, name, src_dir_fd=tmp_fd, dst_dir_fd=send_fd)
    finally:
        os.close(tmp_fd)
        os.close(send_fd)
    return f"{SEND_DIR}/{name}"


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _refused(error: Any, voice: VoiceAccess) -> ToolResult:
    status = getattr(error, "status_code", None) or 0
    if status in (401, 403):
        return ToolResult.fail(
            "auth_failed",
            f"the TTS provider refused the key in secret {voice.secret!r} (HTTP {status}): the "
            f"operator sets a valid one with choirctl secret set {voice.secret}",
        )
    if status == 429:
        return ToolResult.fail(
            "rate_limited", "the TTS provider is rate limiting this key: try again later"
        )
    if 400 <= status < 500:
        return ToolResult.fail(
            "invalid_request",
            f"the TTS provider refused the request (HTTP {status}): check voice profile "
            f"{voice.profile!r} (voice_id, output_format) and the provider's model_id",
        )
    return ToolResult.fail(
        "provider_error", f"the TTS provider failed (HTTP {status}); try again later"
    )
