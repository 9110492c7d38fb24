"""Test-only helpers, never installed with the product (tests import them as `support.*`)."""
