"""`python -m ops <command>`: see `ops.cli`."""

import sys

from ops.advice import missing_dependency, third_party

try:
    from ops.cli import main
except ModuleNotFoundError as missing:  # the wrong interpreter: say which, and the one that works
    if not third_party(missing):
        raise
    sys.exit(missing_dependency(missing))

sys.exit(main())
