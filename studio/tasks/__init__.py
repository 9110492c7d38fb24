"""Studio: tasks."""
