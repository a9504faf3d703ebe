"""A local stand-in for ElevenLabs' text-to-speech API (`POST /v1/text-to-speech/{voice_id}`), over
real HTTP, for the official `elevenlabs` client.

It checks the `xi-api-key` header (401 otherwise) and the voice id (404 for an unknown one), and
answers in the requested `output_format`: `opus_*` as a real Ogg Opus stream (its two header
pages, checksummed as Ogg requires), `pcm_<rate>` as raw 16-bit mono PCM of a short tone, `mp3_*`
as bytes that only start like an MP3. Every request (query and JSON body) is recorded;
`fail_next(status)` makes the next answers fail.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

from tests.harness.local_http import serve


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
        table.append(crc & 0xFFFFFFFF)
    return table


_CRC = _crc_table()


def _ogg_page(packet: bytes, sequence: int, *, first: bool) -> bytes:
    header = struct.pack(
        "<4sBBqIIIB", b"OggS", 0, 2 if first else 0, 0, 0x43484F52, sequence, 0, 1
    ) + bytes([len(packet)])
    page = bytearray(header + packet)
    crc = 0
    for byte in page:
        crc = ((crc << 8) ^ _CRC[((crc >> 24) ^ byte) & 0xFF]) & 0xFFFFFFFF
    page[22:26] = struct.pack("<I", crc)
    return bytes(page)


def ogg_opus() -> bytes:
    """A minimal, well-formed Ogg Opus stream: OpusHead and OpusTags, no audio packets."""
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, 312, 48000, 0, 0)
    tags = b"OpusTags" + struct.pack("<I", 5) + b"choir" + struct.pack("<I", 0)
    return _ogg_page(head, 0, first=True) + _ogg_page(tags, 1, first=False)


def pcm_tone(rate: int, seconds: float = 0.25) -> bytes:
    """16-bit little-endian mono PCM of a 440 Hz tone."""
    samples = int(rate * seconds)
    return b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * n / rate)))
        for n in range(samples)
    )


@dataclass
class SpeechRequest:
    voice_id: str
    output_format: str | None
    body: Any
    key: str | None


@dataclass
class ElevenLabsServer:
    key: str
    voices: frozenset[str] = frozenset({"voice-rachel"})
    requests: list[SpeechRequest] = field(default_factory=list)
    _failures: list[int] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    port: int = 0

    @property
    def endpoint(self) -> str:
        """What `tts.<name>.endpoint` is set to."""
        return f"http://127.0.0.1:{self.port}/v1"

    def fail_next(self, status: int) -> None:
        self._failures.append(status)

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/v1/text-to-speech/{voice_id}", self._speak)
        self._runner, self.port = await serve(app)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _speak(self, request: web.Request) -> web.Response:
        voice_id = request.match_info["voice_id"]
        output_format = request.query.get("output_format")
        key = request.headers.get("xi-api-key")
        self.requests.append(SpeechRequest(voice_id, output_format, await request.json(), key))
        if key != self.key:
            return _error(401, "invalid_api_key", "Invalid API key")
        if self._failures:
            return _error(self._failures.pop(0), "injected", "Injected failure")
        if voice_id not in self.voices:
            return _error(
                404, "voice_not_found", f"A voice with the voice_id {voice_id} was not found."
            )
        kind, _, rest = (output_format or "mp3_44100_128").partition("_")
        if kind == "opus":
            return web.Response(body=ogg_opus(), content_type="audio/ogg")
        if kind == "pcm":
            return web.Response(body=pcm_tone(int(rest)), content_type="audio/pcm")
        return web.Response(body=b"ID3\x04\x00\x00not really mp3", content_type="audio/mpeg")


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"detail": {"status": code, "message": message}}, status=status)
