"""choir: self-hosted LLM agent orchestration for one operator on one Linux host."""

__version__ = "0.1.0"
