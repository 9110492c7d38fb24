"""Studio: viewport."""
