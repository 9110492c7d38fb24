"""Studio: runtime."""
