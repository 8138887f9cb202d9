"""Prints one line per synthesized stack: name, resource count, template path (``python -m infra.report cdk.out``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def stack_lines(cloud_assembly: Path) -> list[str]:
    lines = []
    for template in sorted(cloud_assembly.glob("assembly-*/*.template.json")):
        manifest = json.loads((template.parent / "manifest.json").read_text())
        name = next(
            artifact.get("displayName", key)
            for key, artifact in manifest["artifacts"].items()
            if artifact.get("properties", {}).get("templateFile") == template.name
        )
        resources = len(json.loads(template.read_text()).get("Resources", {}))
        lines.append(f"{name:<20} {resources:>4} resources  {template}")
    return lines


if __name__ == "__main__":
    lines = stack_lines(Path(sys.argv[1] if len(sys.argv) > 1 else "cdk.out"))
    if not lines:
        sys.exit("no templates found: run `make synth`")
    print("\n".join(lines))
