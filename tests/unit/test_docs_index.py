"""docs/README.md indexes every document in docs/, and every link in it resolves."""

import os
import re

from tests.conftest import ROOT

DOCS = os.path.join(ROOT, "docs")


def _links():
    text = open(os.path.join(DOCS, "README.md"), encoding="utf-8").read()
    return re.findall(r"\]\(([^)#]+)\)", text)


def test_every_document_is_in_the_index():
    listed = {os.path.normpath(link) for link in _links()}
    documents = {name for name in os.listdir(DOCS) if name.endswith(".md") and name != "README.md"}
    assert documents - listed == set()
    assert "runbooks" in listed


def test_every_link_of_the_index_resolves():
    for link in _links():
        assert os.path.exists(os.path.join(DOCS, link)), link
