"""Studio: episodes."""
