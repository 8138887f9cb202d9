"""What a kept resource's DeletionPolicy and UpdateReplacePolicy are, from its environment's removal policy: every
stateful resource, and the stateless stack's log groups and queues.

Where data is retained both keep the resource, except that the rollback of the create that made it deletes it
(`RetainExceptOnCreate`: it is empty then, and a retry of the failed first create must not collide with it)."""

from __future__ import annotations

from typing import Any


def removal_policies(config: Any) -> tuple[str, str]:
    """(DeletionPolicy, UpdateReplacePolicy) of what the environment keeps."""
    return ("RetainExceptOnCreate", "Retain") if config.retains_data else ("Delete", "Delete")
