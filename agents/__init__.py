"""Modelwright agents layer."""
