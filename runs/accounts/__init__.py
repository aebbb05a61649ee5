"""Accounts: see README.md."""
