"""The Docker engine, through its SDK: containers, the engine's facts, the host it runs on."""
