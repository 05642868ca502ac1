"""faultkit across a fleet: incidents from many nodes in one registry.

`record` turns a triage report (the public `faultkit.triage/1` JSON) into typed incident records with
a signature; `hardware` holds the one table of driver events that point at the hardware and the
suspicion rule; `store` keeps the records in DuckDB (a file, the default) or PostgreSQL (many
writers) behind one interface and answers the registry's questions with the same SQL on both.
"""
