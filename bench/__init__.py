"""Benchmarks: each module's ``run()`` returns a Markdown section; ``python -m bench`` writes docs/benchmarks.md.

Machines here are noisy, so every number is reported beside a baseline measured in the same run.
"""
