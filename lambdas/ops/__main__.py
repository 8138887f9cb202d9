"""`python -m ops <command>`: see `ops.cli`."""

import sys

from ops.advice import missing_dependency

try:
    from ops.cli import main
except ModuleNotFoundError as missing:  # the wrong interpreter: say which, and the one that works
    sys.exit(missing_dependency(missing))

sys.exit(main())
