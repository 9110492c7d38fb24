"""Modelwright training layer."""
