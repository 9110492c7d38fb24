"""Studio: models."""
