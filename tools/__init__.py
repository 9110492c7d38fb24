"""Modelwright tools layer."""
