"""The Go tools the tests run that Debian does not have at the version needed: Prometheus 3's
promtool and server, kubeconform and helm, built from the Go module proxy by scripts/go-tool
(pinned versions, cached under .cache/go-tools/, so only the first run builds). A build that
fails is a failure in CI and a skip naming the command elsewhere."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

from tests.conftest import IN_CI

REPO = Path(__file__).resolve().parents[1]
GO_TOOL = REPO / "scripts" / "go-tool"


@functools.lru_cache(maxsize=None)
def _build(name: str) -> tuple:
    result = subprocess.run([str(GO_TOOL), name], capture_output=True, text=True, timeout=3600)
    return result.returncode, result.stdout.strip().splitlines()[-1:] or [""], result.stderr[-3000:]


def go_tool(name: str) -> str:
    """The path of scripts/go-tool NAME's binary (promtool, prometheus, kubeconform, helm)."""
    code, (path,), stderr = _build(name)
    if code == 0 and Path(path).is_file():
        return path
    message = f"scripts/go-tool {name} failed:\n{stderr}"
    if IN_CI:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)
