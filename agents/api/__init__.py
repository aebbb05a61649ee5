"""Agents over the REST API (read-only): `GET /api/v1/agents`, `GET /api/v1/agents/{slug}`."""
