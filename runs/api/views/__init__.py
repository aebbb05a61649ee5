"""The API's views of runs, events, decisions, tickets, threads and messages, and the audit
log, one module per resource.

Every write goes through `runs.services` (the same code as the pages and the CLI), with
an Actor naming the user and, for a token, which token."""
