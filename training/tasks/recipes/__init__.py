"""Recipes the task families share, one topic a module (a family's own helpers stay in its file)."""
