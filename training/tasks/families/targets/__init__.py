"""The targets families, one a file (the table that registers them: training/tasks/families/__init__.py)."""
