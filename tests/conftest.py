"""Shared test fixtures. Append new fixtures; do not rewrite others'."""

import pytest


# --- tiny local vision-language model (agents/tinymodel.py) -------------------------------
@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Qwen3-VL built offline once per test session (~6 s); treat it as read-only."""
    from agents.tinymodel import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)
