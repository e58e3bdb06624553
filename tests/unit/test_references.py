"""Every file, module and section that a comment or a document names exists.

Read from the repository as it is at test time (the tracked files and those not yet added), so
a file moved or renamed without its mentions fails here, wherever it is named:

- a repository path (`docs/serving.md`, `exporter/storpath/scrape/slow.py`, `scripts/test`,
  `tests/unit/`), and outside tests/ a path inside the package written from a folder of it
  (`readers/pci.py`, `capture/files.py`): some file of the package must end with it;
- a link of a Markdown document (`[alerts](alerts.md)`, `(../README.md)`), relative to it;
- a section: `docs/performance.md's "State kept on the scrape path"`, `docs/metrics.md,
  "Last known state"`, `CONTRIBUTING.md ("The inner loop")` (a heading that begins so, or a
  paragraph's bold lead), and an anchor (`docs/check.md#the-landing-page`, `(#tls-and-basic-auth)`)
  against the headings' GitHub anchors;
- a module or name of the package: `storpath.scrape.slow.SlowRunner` anywhere outside tests/,
  and in documents a backticked one written from a folder of the package
  (`readers.instances.InstanceCache`).

Paths git ignores (a build writes them) count as existing; the few other names that are
meant not to exist are in NOT_FILES with the reason.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
import subprocess
from typing import Dict, Iterator, List, Set, Tuple

from tests.conftest import ROOT

PACKAGE = os.path.join(ROOT, "exporter", "storpath")

# Paths and names that are meant not to exist, each for its reason.
NOT_FILES = {
    "collectors/thermal.py": "CONTRIBUTING's worked example of a new collector (\"an example name; none exists\")",
    "readers/thermal.py": "the same example's reader",
    "analysis/thermal.py": "the same example's analysis",
    "debian/prometheus-storpath-exporter.service": "written by debian/rules from deploy/systemd/storpath.service",
    "debian/storpath.1": "written by debian/rules (storpath.manpage)",
    "storpath.collectors.thermal": "the worked example's config section (`collectors.thermal`)",
}
# Files whose text is not checked: history names files as they were, captures and fixtures are data.
SKIPPED = ("CHANGELOG.md", "tests/fixtures/", "tests/lab/captures/", "exporter/storpath/examples/", "debian/patches/",
           "deploy/helm/storpath/files/", "deploy/kubernetes/base/grafana-dashboards.yaml", "dashboards/",
           "mixin/generated/", "docs/images/")
TEXT = re.compile(r"\.(py|md|yml|yaml|sh|mk|libsonnet|jsonnet|toml|txt|cfg|in|service|conf)$"
                  r"|(^|/)(Makefile|Dockerfile|rules|control)$|^scripts/[\w-]+$|^\.ci/")
TOP = ("docs", "exporter", "tests", "scripts", "rules", "dashboards", "deploy", "mixin", "benchmarks", "debian",
       "mk", ".ci")
REPO_PATH = re.compile(r"(?<![\w./$-])((?:%s)/[\w./-]*[\w/]|(?:README|CONTRIBUTING|CHANGELOG)\.md)(?![\w/-])"
                       % "|".join(re.escape(top) for top in TOP))
PACKAGE_PATH = re.compile(r"(?<![\w./$-])((?:[a-z_]+/)+[a-z_0-9]+\.py)\b")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
SECTION = re.compile(r"((?:[\w.-]+/)*[\w.-]+\.md)(?:'s|’s|,)? \(?[\"“]([^\"”\n]{2,80})[\"”]")
ANCHOR = re.compile(r"((?:[\w.-]+/)*[\w.-]+\.md)?#([a-z0-9_-]+)\b")
DOTTED = re.compile(r"(?<![\w.])storpath(?:\.[A-Za-z_]\w*)+")
PLACEHOLDER = re.compile(r"[*<>{}$]|\bNAME\b|/X/|\bX\.")


@functools.lru_cache(maxsize=None)
def files() -> Tuple[str, ...]:
    listed = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "-co", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    return tuple(sorted(name for name in listed if name and os.path.exists(os.path.join(ROOT, name))))


@functools.lru_cache(maxsize=None)
def package_files() -> Tuple[str, ...]:
    return tuple("/" + os.path.relpath(os.path.join(ROOT, name), PACKAGE) for name in files()
                 if name.startswith("exporter/storpath/") and name.endswith(".py"))


@functools.lru_cache(maxsize=None)
def subpackages() -> Set[str]:
    return {name.split("/")[1] for name in package_files() if name.count("/") > 1} | \
        {name[1:-3] for name in package_files() if name.count("/") == 1}


def texts() -> Iterator[Tuple[str, str]]:
    for name in files():
        if name.startswith(SKIPPED) or not TEXT.search(name):
            continue
        try:
            with open(os.path.join(ROOT, name), encoding="utf-8") as handle:
                yield name, handle.read()
        except (UnicodeDecodeError, IsADirectoryError):
            continue


def _where(name: str, text: str, pos: int) -> str:
    return f"{name}:{text.count(chr(10), 0, pos) + 1}"


@functools.lru_cache(maxsize=None)
def ignored(path: str) -> bool:
    return subprocess.run(["git", "-C", ROOT, "check-ignore", "-q", "--no-index", path]).returncode == 0


def exists(path: str, near: str = "") -> bool:
    for base in (ROOT, os.path.join(ROOT, os.path.dirname(near))):
        if os.path.exists(os.path.normpath(os.path.join(base, path))):
            return True
    return ignored(path) or path in NOT_FILES


def test_every_repository_path_named_exists():
    missing = []
    for name, text in texts():
        for match in REPO_PATH.finditer(text):
            path = match.group(1).rstrip(".")
            if not PLACEHOLDER.search(text[match.start():match.end() + 1]) and not exists(path):
                missing.append(f"{_where(name, text, match.start())}: {path}")
    assert not missing, "\n".join(missing)


def test_every_path_of_the_package_named_from_a_folder_of_it_exists():
    missing = []
    for name, text in texts():
        if name.startswith("tests/"):  # tests plant files that do not exist by design
            continue
        for match in PACKAGE_PATH.finditer(text):
            path = match.group(1)
            if path.split("/")[0] not in subpackages() or path.startswith(TOP) or path in NOT_FILES:
                continue
            if not any(found.endswith("/" + path) for found in package_files()) and not exists(path, name):
                missing.append(f"{_where(name, text, match.start())}: {path}")
    assert not missing, "\n".join(missing)


def test_every_link_of_a_document_resolves():
    missing = []
    for name, text in texts():
        if not name.endswith(".md"):
            continue
        for match in MD_LINK.finditer(text):
            target = match.group(1).split("#")[0]
            if not target or re.match(r"[a-z]+:", target):
                continue
            if not os.path.exists(os.path.normpath(os.path.join(ROOT, os.path.dirname(name), target))):
                missing.append(f"{_where(name, text, match.start())}: {match.group(1)}")
    assert not missing, "\n".join(missing)


def _plain(heading: str) -> str:
    return re.sub(r"[`*_]", "", heading).strip().lower()


@functools.lru_cache(maxsize=None)
def sections(path: str) -> Tuple[List[str], Set[str]]:
    """A Markdown file's headings and bold paragraph leads (plain, lower case) and its anchors."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        text = handle.read()
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # a `#` in a code block is no heading
    headings = [_plain(h) for h in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)]
    leads = [_plain(b) for b in re.findall(r"^\*\*([^*\n]+)\*\*", text, re.M)]
    anchors = {re.sub(r"[^\w\- ]", "", h).replace(" ", "-") for h in headings}
    anchors |= set(re.findall(r"<a (?:name|id)=\"([\w-]+)\"", text))
    return headings + leads, anchors


def _document(path: str, near: str) -> str:
    for candidate in (os.path.normpath(os.path.join(os.path.dirname(near), path)), os.path.normpath(path)):
        if candidate in files():
            return candidate
    return ""


def test_every_section_named_exists():
    missing = []
    for name, text in texts():
        for match in SECTION.finditer(text):
            document = _document(match.group(1), name)
            if not document:
                continue  # not a file of the repository (the path checks above take those that look like one)
            wanted = _plain(match.group(2))
            if not any(found.startswith(wanted) for found in sections(document)[0]):
                missing.append(f"{_where(name, text, match.start())}: {document} has no section {match.group(2)!r}")
        for match in ANCHOR.finditer(text):
            if match.group(1) is None and not name.endswith(".md"):
                continue
            if match.group(1) is None and not text[max(match.start() - 2, 0):match.start()].endswith("]("):
                continue  # a `#` in prose or a colour, not a link to this document's heading
            document = _document(match.group(1), name) if match.group(1) else name
            if document and match.group(2) not in sections(document)[1]:
                missing.append(f"{_where(name, text, match.start())}: {document} has no anchor #{match.group(2)}")
    assert not missing, "\n".join(missing)


def _resolves(dotted: str) -> bool:
    """The longest part that is a module, and the name after it in that module (what follows
    it, an instance's attribute such as `Snapshotter.last`, is not checked); a collector's
    config key (`collectors.zfs.interval`) in its `config_defaults`."""
    parts = dotted.split(".")
    if len(parts) == 4 and parts[1] == "collectors" and parts[3].islower():
        from storpath.collectors import load_all

        spec = load_all().get(parts[2])
        if spec is not None:
            return parts[3] in spec.cls.config_defaults or parts[3] == "enabled"
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            return cut == len(parts) or hasattr(importlib.import_module(module), parts[cut])
    return False


def test_every_module_and_name_of_the_package_named_exists():
    unknown: Dict[str, List[str]] = {}
    inner = "|".join(sorted(subpackages()))
    backticked = re.compile(rf"`((?:{inner})(?:\.[A-Za-z_]\w*)+)`")
    for name, text in texts():
        if name.startswith("tests/"):  # tests name planted and deliberately missing modules
            continue
        found = [(m.start(), m.group(0)) for m in DOTTED.finditer(text)
                 if m.group(0).split(".")[1] in subpackages()]
        if name.endswith(".md"):
            found += [(m.start(), "storpath." + m.group(1)) for m in backticked.finditer(text)]
        for pos, dotted in found:
            dotted = re.sub(r"\.(py|md)$", "", dotted)
            if not PLACEHOLDER.search(dotted) and dotted not in NOT_FILES and not _resolves(dotted):
                unknown.setdefault(dotted, []).append(_where(name, text, pos))
    assert not unknown, "\n".join(f"{dotted}: {', '.join(where)}" for dotted, where in sorted(unknown.items()))
