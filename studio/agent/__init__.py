"""Studio: agent."""
