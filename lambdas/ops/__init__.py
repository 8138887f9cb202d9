"""Ops tools over the runtime packages: reindex (mapping-change flow), reconcile, and the DLQ redrive.

`python -m ops --help`. Every command is safe to rerun; see docs/operations.md, "Ops commands".
"""
