"""Studio: training."""
