"""Where agents run (§15): one interface, the docker and process runtimes, adoption."""
