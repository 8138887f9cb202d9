"""Writing generated files: each regeneration command says what it wrote and what it left as it was."""

from __future__ import annotations

from pathlib import Path

from infra.validation import ROOT


def write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` if it differs, and say which: ``wrote <path>`` or ``<path> unchanged``."""
    shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    if path.exists() and path.read_text() == text:
        print(f"{shown} unchanged")
        return
    path.write_text(text)
    print(f"wrote {shown}")
