"""CONTRIBUTING.md: "No state of your own." Between scrapes of every fixture machine,
storpath's modules and the readers', collectors' and analysis' objects a served exporter
holds change only where docs/performance.md's "State kept on the scrape path" says
(rules.kept_state)."""

import pytest

from tests.architecture.rules import allowed, kept_state, listed_state
from tests.architecture.served import observe
from tests.fixtures import machines

CASES = machines.all_cases()


@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}:{v}" for n, v in CASES])
def test_between_scrapes_only_the_listed_state_changes(judged, name, variant):
    assert judged(name, variant).state == []


def test_the_watch_sees_the_listed_state_change(machine_tree):
    """The check is not blind: with no names allowed, what the table lists is what changed."""
    changed = kept_state(observe(machine_tree("am4-x570-firecuda", "healthy")).taken, names=())
    assert "storpath.readers.instances.InstanceCache._entries" in changed
    assert all(allowed(name.split(" ")[0], listed_state()) for name in changed), changed
