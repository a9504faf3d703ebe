"""`choirctl model|voice`: the named LLMs, TTS providers and voice profiles."""
