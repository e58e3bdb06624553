"""`storpath capture` of the RAID tools: their outputs, as readers.raid runs them, written into
captured/<tool>/ (the layout readers.raid.merge reads), each file 0600 in folders 0700: they
carry serial numbers and SAS addresses until the archive is redacted."""

from __future__ import annotations

import os
from typing import List

from storpath.base import atomicfile
from storpath.readers.raid.tools import ToolRunner, bound_controllers
from storpath.base.roots import Roots


def capture_commands(roots: Roots, folder: str) -> List[str]:
    """Run what the reader runs (only where a controller the tools speak to is bound) and write
    the outputs; the tools that failed, with the reason."""
    bound = bound_controllers(roots)
    if not bound:
        return []
    runner = ToolRunner(roots, timeout=120.0)
    try:
        outputs, failed = runner.run_tools(bound)
    finally:
        runner.close()
    for (tool, name), text in outputs.items():
        path = os.path.join(folder, tool, name)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        atomicfile.replace_file(path, text.encode("utf-8"), mode=0o600)
    return [f"{tool}: {status.reason}" for tool, status in sorted(failed.items())]


__all__ = ["capture_commands"]
