"""Benchmarks of the distributed mode (see bench/README.md). Not part of the app."""
