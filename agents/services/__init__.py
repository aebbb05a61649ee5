"""Writes and validation of agent configuration, one module per entity: `agents`
(validate, publish, restore, permission rules), `permissions` (rule checks and the
preview), `endpoints` (remote endpoints: validation, SSRF guard, probe, backend),
`providers` (connection probe and check) and `health` (the recorded health of providers
and endpoints). Reads live in `agents.selectors`; see agents/README.md for the names.
"""
