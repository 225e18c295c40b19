"""Helpers for the training-script idiom suite (tests/backend/test_idioms_*.py): tiny models, data, scripts."""
