"""migrate package."""
