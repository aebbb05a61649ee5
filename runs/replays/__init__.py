"""Replays and forks: see README.md."""
