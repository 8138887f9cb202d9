"""Ops tools over the runtime packages: reindex (mapping-change flow), reconcile, the DLQ redrive, purge, smoke.

`.venv/bin/python -m ops --help` from the repository root. Every command is safe to rerun; see docs/operations.md,
"Ops workflows: reindex, reconcile, redrive, purge, smoke".
"""
