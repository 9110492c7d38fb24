"""Studio: history."""
