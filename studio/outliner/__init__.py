"""Studio: outliner."""
