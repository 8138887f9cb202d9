"""The test nodes' class archives: recorded by the set-up, mapped by every node's JVM as it starts.

Much of a node's start is its JVM loading, verifying and linking the classes of the engine's jars (and the security
plugin's), and every test session starts each kind. A dynamic class-data-sharing archive
(`-XX:ArchiveClassesAtExit`, JDK 13+) holds them parsed and verified; a JVM that maps it starts on less CPU
(measured back to back on two cores: the engine 4.1 -> 2.5 s, the secured node 7.3 -> 5.1 s). `make engine`
records each node kind's archive by starting and stopping one node, after the jars are installed; this skips a node
whose archive the JVM accepts already.

The JVM checks an archive against its JDK and each classpath jar's size and time: one that does not match (another
JDK, reinstalled jars) is ignored with a warning in the node's log and the node starts at the full cost, and
tests/support/test_engine_node.py fails saying to run this again.

    python -m tests.support.node_archive
"""

from __future__ import annotations

import sys

from tests.support.engine_node import EngineNode
from tests.support.engine_setup import EngineSetupError
from tests.support.secured_node import SecuredNode

NODES = (EngineNode, SecuredNode)
# Writing an archive takes a few seconds of CPU after the node stops; a loaded machine stretches it.
RECORD_TIMEOUT_SECONDS = 600.0


def record(kinds: tuple[type[EngineNode], ...] = NODES) -> list[str]:
    """Record the archive of each node kind the JVM does not accept one for (both at once: one core each); the
    kinds recorded."""
    stale = [kind for kind in kinds if not kind.launcher.archive_matches()]
    nodes = [kind().start(record_archive=True) for kind in stale]
    for node in nodes:
        node.wait_ready()
    for node in nodes:
        node.stop(timeout=RECORD_TIMEOUT_SECONDS)
    for kind in stale:
        if not kind.launcher.archive_matches():
            raise EngineSetupError(
                f"the JVM did not record a usable class archive at {kind.launcher.archive}"
            )
    return [kind.launcher.name for kind in stale]


def main() -> int:
    try:
        recorded = record()
    except EngineSetupError as error:
        print(f"class archives: {error}", file=sys.stderr)
        return 1
    print(f"class archives: recorded for {', '.join(recorded)}" if recorded else "class archives: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
