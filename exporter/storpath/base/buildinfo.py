"""What build of storpath runs: `storpath_build_info{version,revision,branch,python}`.

The revision and branch come from `_build_info.json` at the package's root when a package
build wrote one ({"revision": "...", "branch": "..."}), else from the git checkout the
module runs from (read from .git's files, no git command), else "unknown".
"""

from __future__ import annotations

import functools
import json
import os
import platform
from typing import Dict, Optional

from storpath import __version__

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=1)
def info() -> Dict[str, str]:
    found = _from_file(os.path.join(PACKAGE, "_build_info.json")) or _from_git(os.path.dirname(os.path.dirname(PACKAGE)))
    found = found or {}
    return {"version": __version__, "revision": found.get("revision") or "unknown",
            "branch": found.get("branch") or "unknown", "python": platform.python_version()}


def _from_file(path: str) -> Optional[Dict[str, str]]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return {k: str(v) for k, v in data.items() if k in ("revision", "branch")} if isinstance(data, dict) else None


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _from_git(top: str) -> Optional[Dict[str, str]]:
    git = os.path.join(top, ".git")
    if os.path.isfile(git):  # a worktree: "gitdir: <path>"
        text = _read(git) or ""
        if not text.startswith("gitdir:"):
            return None
        git = os.path.join(top, text.split(":", 1)[1].strip())
    head = _read(os.path.join(git, "HEAD"))
    if not head:
        return None
    if not head.startswith("ref:"):
        return {"revision": head, "branch": "HEAD"}
    ref = head.split(":", 1)[1].strip()
    common = _read(os.path.join(git, "commondir"))
    common_dir = os.path.join(git, common) if common else git
    revision = _read(os.path.join(git, ref)) or _read(os.path.join(common_dir, ref))
    if revision is None:
        for line in (_read(os.path.join(common_dir, "packed-refs")) or "").splitlines():
            parts = line.split(" ", 1)
            if len(parts) == 2 and parts[1] == ref:
                revision = parts[0]
    return {"revision": revision or "unknown", "branch": ref.rsplit("refs/heads/", 1)[-1]}
