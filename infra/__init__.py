"""The platform's infrastructure as code.

The runtime packages (key conventions, the schema registry, search) live in lambdas/, the root of every Lambda
asset; the app and every `python -m infra.<command>` (report, cost, guard, diagram) import them from there.
"""

import sys
from pathlib import Path

_LAMBDAS = str(Path(__file__).resolve().parent.parent / "lambdas")
if _LAMBDAS not in sys.path:
    sys.path.insert(0, _LAMBDAS)
