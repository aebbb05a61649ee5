"""The REST API under /api/v1/ (DRF): runs, events (JSON and Server-Sent Events),
decisions, tickets, threads and messages, agents and the audit log."""
