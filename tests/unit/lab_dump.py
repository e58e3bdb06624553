"""Reads the attribute dumps of a real kernel kept in tests/unit/data (made under QEMU by tests/lab)."""

import os
import re
from typing import Dict

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
_SECTION = re.compile(r"^== (\S+) -> (\S+)$")
_ATTR = re.compile(r"^([A-Za-z_]+)=\[(.*)\]$")


def load(name: str) -> Dict[str, Dict[str, str]]:
    """{class link: {attribute: value}}, plus the real path under the key '@path'."""
    sections: Dict[str, Dict[str, str]] = {}
    current = None
    with open(os.path.join(DATA, name), encoding="utf-8") as handle:
        for line in handle:
            line = line.rstrip("\n")
            if line.startswith("#") or not line:
                continue
            section = _SECTION.match(line)
            if section:
                current = sections.setdefault(section.group(1), {"@path": section.group(2)})
                continue
            attr = _ATTR.match(line)
            if attr and current is not None:
                current[attr.group(1)] = attr.group(2)
    return sections
