"""The scripted model provider: an OpenAI-compatible server replaying scripts of chat completions.

Tests and benchmarks point the real LLM client at it; with no real model configured, agents talk
to its demo script (`demo_script`), labelled a demo model wherever the model name is shown.
"""

from __future__ import annotations

from choir.scripted.demo import DEMO_MODEL_ID, demo_script
from choir.scripted.script import (
    HttpErrorStep,
    RateLimitStep,
    RawStep,
    ReplyStep,
    Script,
    ScriptedCall,
    Step,
    ToolCallsStep,
    load_script,
)
from choir.scripted.server import ANY_MODEL, SCRIPT_HEADER, RecordedRequest, ScriptedModelServer

__all__ = [
    "ANY_MODEL",
    "DEMO_MODEL_ID",
    "SCRIPT_HEADER",
    "HttpErrorStep",
    "RateLimitStep",
    "RawStep",
    "RecordedRequest",
    "ReplyStep",
    "Script",
    "ScriptedCall",
    "ScriptedModelServer",
    "Step",
    "ToolCallsStep",
    "demo_script",
    "load_script",
]
