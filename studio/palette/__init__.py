"""Studio: palette."""
