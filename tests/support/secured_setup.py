"""The secured test node's kind (tests/support/engine_setup.py installs it), installed by the same set-up step as the
engine (`make engine`).

Why a second node kind: the security plugin (`org.opensearch.plugin:opensearch-security`) is published for a few
engine versions only, and none is the engine's (config's `engine_version`, tests/support/engine/pom.xml), while a
plugin runs only in the core it was built for (a 3.4 plugin in a 3.3 core fails on the first action: the core's
ActionFilter API changed). So the tests of what fine-grained access control enforces run on a node of the version
the plugin is published for nearest above the engine's, pinned once: `opensearch.version` in
tests/support/secured/pom.xml (SECURED_VERSION below reads it; tests/support/test_secured_node.py states the relation).

pom.xml names the core, the engine's modules, the plugin's zip and commons-collections4 (which the plugin needs and a
distribution ships with another module); secured.lock pins each by group:artifact:version and SHA-256. The launcher
is the engine's (engine/NodeLauncher.java), compiled against this node's jars; it loads the plugin it finds there.

    python -m tests.support.secured_setup install
    python -m tests.support.secured_setup lock
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.support.engine_setup import ENGINE, NodeKind, main
from tests.support.engine_setup import LAUNCHER_CLASS as LAUNCHER_CLASS  # the one launcher, both kinds

SECURED = NodeKind(
    "secured node", Path(__file__).resolve().parent / "secured", "secured.lock", ENGINE.cache / "secured"
)
# The engine versions `org.opensearch.plugin:opensearch-security` is published for on the registry (its metadata,
# read 2026-12-05; 3.3.x.0 was refused). The secured node's version, pom.xml's `opensearch.version`, must be the
# nearest of these at or above the engine's (tests/support/test_secured_node.py checks it): update both together.
PLUGIN_PUBLISHED_FOR = ("2.11.1", "2.19.3", "2.19.4", "3.4.0")
_VERSION = re.search(r"<opensearch\.version>([^<]+)<", SECURED.pom.read_text())
assert _VERSION is not None, f"{SECURED.pom} names no opensearch.version"
SECURED_VERSION = _VERSION[1]

if __name__ == "__main__":
    sys.exit(main(kind=SECURED))
