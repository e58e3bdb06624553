import pytest

from tests.architecture.served import observe


@pytest.fixture(scope="session")
def observed(machine_tree):
    """observed(name, variant) -> served.Observed of that fixture machine: three scrapes and
    `storpath check`, recorded once per session and shared by the rules that judge it."""
    runs = {}

    def get(name: str, variant: str):
        if (name, variant) not in runs:
            runs[name, variant] = observe(machine_tree(name, variant))
        return runs[name, variant]

    return get
