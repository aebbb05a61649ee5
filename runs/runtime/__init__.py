"""The agent runtime: plain Python, no Django (enforced by import-linter)."""
