"""Decisions: see README.md."""
