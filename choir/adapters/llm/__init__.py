"""The LLM client (§10): one OpenAI-compatible HTTP client, its answers checked, errors typed."""
