"""Studio: server."""
