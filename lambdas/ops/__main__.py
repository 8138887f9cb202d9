"""`python -m ops <command>`: see `ops.cli`."""

import sys

from ops.cli import main

sys.exit(main())
