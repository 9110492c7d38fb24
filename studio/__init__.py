"""Modelwright studio layer."""
