"""The runbooks at /runbooks/: one page per alert (docs/runbooks/ of the repository, in the
package as storpath/http/runbooks/), served by every exporter in the version it runs. The
alerts' runbook_url (rules/config/thresholds.yml, runbook_url_base) and the landing page's
links (web.runbook_url_base) lead here unless a site points them elsewhere, so a runbook opens
from a default install without anything published.

`/runbooks/<AlertName>.md` answers the runbook as UTF-8 text (Markdown, readable as it is);
`/runbooks/` lists them. A request's path is never joined to a file's: only a name of the
folder's own listing that is an alert's name (letters and digits) and `.md` is opened, and no
link is followed to it, so nothing outside the folder can be named (`..`, an encoded slash, a
second dot, a link planted in the folder are all a 404).
"""

from __future__ import annotations

import os
import re
import stat
from typing import List, Optional, Tuple

PREFIX = "/runbooks/"
FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runbooks")
NAME = re.compile(r"[A-Z][A-Za-z0-9]{0,127}\.md")
MAX_BYTES = 1 << 20  # a runbook is a few KB; a larger file is not one
TEXT = "text/plain; charset=utf-8"
HEADERS = (("X-Content-Type-Options", "nosniff"),)

Answer = Tuple[str, bytes, str, List[Tuple[str, str]]]


def listed() -> List[str]:
    """The runbooks' file names (`PcieLinkDown.md`), sorted; none when the folder is missing."""
    try:
        return sorted(name for name in os.listdir(FOLDER) if NAME.fullmatch(name))
    except OSError:
        return []


def _read(name: str) -> Optional[bytes]:
    try:
        fd = os.open(os.path.join(FOLDER, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_BYTES + 1)
        return data if len(data) <= MAX_BYTES else None
    finally:
        os.close(fd)


def _index(names: List[str]) -> bytes:
    import html  # the index is asked for rarely: serve starts without it

    items = "".join(f'<li><a href="{html.escape(name)}">{html.escape(name[:-3])}</a></li>\n' for name in names)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>storpath runbooks</title></head>\n"
            f"<body><h1>storpath runbooks</h1>\n<p>One page per alert: what it means, how to confirm it by "
            f"hand, how to fix it.</p>\n<ul>\n{items}</ul>\n<p><a href=\"../\">storpath</a></p></body></html>\n"
            ).encode("utf-8")


def answer(path: str) -> Answer:
    """The answer to a GET of `path` (`/runbooks`, or one under PREFIX): (status, body,
    content type, extra headers)."""
    if path == PREFIX.rstrip("/"):
        return "301 Moved Permanently", b"See runbooks/\n", TEXT, [("Location", "runbooks/")]
    name = path[len(PREFIX):]
    if name == "":
        return "200 OK", _index(listed()), "text/html; charset=utf-8", list(HEADERS)
    body = _read(name) if NAME.fullmatch(name) and name in listed() else None
    if body is None:
        return "404 Not Found", b"No such runbook. The list: /runbooks/\n", TEXT, list(HEADERS)
    return "200 OK", body, TEXT, list(HEADERS)
