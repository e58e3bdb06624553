"""A snapshot of a machine as its readers see it, and the tar.gz that holds it."""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import time
from typing import Dict, List, Optional

from storpath import __version__
from storpath.base import atomicfile, log
from storpath.report.capture.files import Tree, reader_files
from storpath.report.capture.redact import Redactor
from storpath.base.roots import Roots

LOG = log.get("capture")

# ---- the archive --------------------------------------------------------------------

def snapshot(roots: Roots, work: str, redact: bool) -> Dict:
    """Read everything into memory, then let `write_archive` store it. Returns the manifest."""
    found, broken = reader_files()
    sys_tree, proc_tree = Tree(roots.sysfs), Tree(roots.procfs)
    per_reader: Dict[str, Dict[str, int]] = {}
    commands: List[Dict] = []
    for reader in found:
        counts = {"sysfs": 0, "procfs": 0}
        for pattern in reader.sysfs:
            counts["sysfs"] += sys_tree.add_pattern(pattern)
        for pattern in reader.procfs:
            counts["procfs"] += proc_tree.add_pattern(pattern)
        per_reader[reader.name] = counts
    captured_tree = Tree(os.path.join(work, "captured"))
    os.makedirs(captured_tree.root, exist_ok=True)
    if roots.captured:
        # Capturing a replayed machine: its command outputs are already saved.
        if os.path.isdir(roots.captured):
            captured_tree = Tree(roots.captured)
            captured_tree.add_tree()
    else:
        for reader in found:
            if reader.commands is None:
                continue
            started = time.monotonic()
            try:
                notes = reader.commands(roots, captured_tree.root) or []
                commands.append({"reader": reader.name, "ok": True, "notes": list(notes),
                                 "seconds": round(time.monotonic() - started, 3)})
            except Exception as exc:  # a failing command must not lose the rest of the capture
                commands.append({"reader": reader.name, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
        captured_tree.add_tree()
    redactor = Redactor() if redact else None
    if redactor:
        redactor.learn_sysfs(sys_tree)
        redactor.learn_outputs(captured_tree)
        trees = (sys_tree, proc_tree, captured_tree)
        redactor.learn_names([*(rel for tree in trees for rel in [*tree.files, *tree.dirs, *tree.links]),
                              *(target for tree in trees for target in tree.links.values())])
        for tree in trees:
            tree.files = {rel: redactor.apply(rel, data) for rel, data in tree.files.items()}
            redact_names(tree, redactor)
    return {
        "trees": {"sys": sys_tree, "proc": proc_tree, "captured": captured_tree},
        "manifest": {
            "format": 1,
            "storpath_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "source": {"sysfs": roots.sysfs, "procfs": roots.procfs, "captured": roots.captured},
            "redacted": bool(redact),
            "redacted_values": len(redactor.mapping) if redactor else 0,
            "readers": per_reader,
            "readers_not_loaded": broken,
            "files": {name: len(tree.files) for name, tree in (("sys", sys_tree), ("proc", proc_tree),
                                                                 ("captured", captured_tree))},
            "unreadable": {f"{name}/{rel}": why for name, tree in (("sys", sys_tree), ("proc", proc_tree))
                           for rel, why in sorted(tree.unreadable.items())},
            "commands": commands,
        },
    }


def redact_names(tree: Tree, redactor: Redactor) -> None:
    """Every file, folder and link name of `tree`, and every link's target, with the identities
    the redactor learned replaced (a by-id name, a WWID in a folder's name, a fabrics host's
    name): the same stand-ins as in the files' text, so the tree still replays whole."""
    name = redactor.apply_name
    tree.files = {name(rel): data for rel, data in tree.files.items()}
    tree.dirs = {name(rel) for rel in tree.dirs}
    tree.links = {name(rel): name(target) for rel, target in tree.links.items()}
    tree.mtimes = {name(rel): when for rel, when in tree.mtimes.items()}
    tree.unreadable = {name(rel): why for rel, why in tree.unreadable.items()}


def archive_top(output: str) -> str:
    base = os.path.basename(output)
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if base.endswith(suffix):
            base = base[:-len(suffix)]
            break
    return re.sub(r"[^A-Za-z0-9._-]", "_", base) or "storpath-capture"


def write_archive(output: str, top: str, trees: Dict[str, Tree], manifest: Dict, readme: str) -> None:
    mtime = int(time.time())

    def info(name: str, kind: bytes, size: int = 0, link: str = "", when: Optional[float] = None) -> tarfile.TarInfo:
        entry = tarfile.TarInfo(f"{top}/{name}" if name else top)
        entry.type, entry.size, entry.mtime = kind, size, int(when if when is not None else mtime)
        entry.mode = 0o755 if kind == tarfile.DIRTYPE else (0o777 if kind == tarfile.SYMTYPE else 0o644)
        entry.linkname = link
        entry.uname = entry.gname = ""
        return entry

    def add_all(tar: tarfile.TarFile) -> None:
        tar.addfile(info("", tarfile.DIRTYPE))
        for name, tree in trees.items():
            tar.addfile(info(name, tarfile.DIRTYPE))
            dirs = set()
            for rel in tree.dirs | {os.path.dirname(r) for r in list(tree.files) + list(tree.links)}:
                while rel and rel not in dirs:
                    dirs.add(rel)
                    rel = os.path.dirname(rel)
            for rel in sorted(dirs - set(tree.links)):
                tar.addfile(info(f"{name}/{rel}", tarfile.DIRTYPE))
            for rel in sorted(tree.files):
                data = tree.files[rel]
                when = tree.mtimes.get(rel) if name == "captured" else None
                tar.addfile(info(f"{name}/{rel}", tarfile.REGTYPE, len(data), when=when), io.BytesIO(data))
            for rel in sorted(tree.links):
                tar.addfile(info(f"{name}/{rel}", tarfile.SYMTYPE, link=tree.links[rel]))
        for name, text in (("README.md", readme), ("MANIFEST.json", json.dumps(manifest, indent=2) + "\n")):
            data = text.encode()
            tar.addfile(info(name, tarfile.REGTYPE, len(data)), io.BytesIO(data))

    def write(handle) -> None:
        with tarfile.open(fileobj=handle, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            add_all(tar)

    # 0600: an archive carries serial numbers, WWNs and SAS addresses unless redacted, and the
    # host's layout even then; its owner chooses whom to give it to.
    atomicfile.replace_file(output, write, mode=0o600)
