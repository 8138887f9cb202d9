"""The platform's infrastructure as code.

The runtime packages (key conventions, the schema registry, search) live in lambdas/, the root of every Lambda
asset; the app and every `python -m infra.<command>` (report, cost, guard, diagram) import them from there.
"""

import os
import sys
from pathlib import Path

# Every `python -m infra.<command>` starts jsii before it prints: no Node end-of-life banner on a supported Node 20
# (app.py sets the same before it imports aws_cdk).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

_LAMBDAS = str(Path(__file__).resolve().parent.parent / "lambdas")
if _LAMBDAS not in sys.path:
    sys.path.insert(0, _LAMBDAS)
