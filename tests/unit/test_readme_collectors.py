"""README's collectors table names every collector the registry has, and no other."""

import os
import re

from storpath.collectors import load_all
from tests.conftest import ROOT


def test_the_collectors_table_is_the_registry():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    table = text[text.index("| collector | what | when |"):]
    table = table[:table.index("\n\n")]
    named = set()
    for row in table.splitlines()[2:]:
        named.update(re.findall(r"`([a-z_]+)`", row.split("|")[1]))
    assert named == set(load_all())
