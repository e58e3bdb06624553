"""Fixtures for the lab tier: real Linux guests under QEMU with emulated storage.

One guest boots per topology per test module (module-scoped fixtures), so a module can
inject faults between scrapes without paying for a boot each time. Tests here run only
when QEMU and mmdebstrap are installed; without them they are skipped with a reason
naming what is missing, except under CI (the CI variable set), where that is a failure.
"""

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lab  # noqa: E402

REQUIRED_TOOLS = {
    "qemu-system-x86_64": "qemu-system-x86",
    "mmdebstrap": "mmdebstrap",
}

_timings = []


GUEST_FIXTURES = {"lab_image", "nvme_guest", "sas_guest", "md_guest", "multipath_guest"}


def pytest_collection_modifyitems(config, items):
    # Every test that boots a guest is a lab test, whether or not its module says so.
    for item in items:
        if GUEST_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.lab)


def pytest_terminal_summary(terminalreporter):
    if _timings:
        terminalreporter.write_sep("-", "storpath lab timings")
        for what, seconds in _timings:
            terminalreporter.write_line(f"{what}: {seconds:.1f} s")


def _require_tools():
    missing = [tool for tool in REQUIRED_TOOLS if not shutil.which(tool)]
    if not missing:
        return
    packages = " ".join(sorted({REQUIRED_TOOLS[t] for t in missing}))
    msg = (f"lab tier needs {', '.join(missing)} "
           f"(apt-get install {packages}); see tests/lab/lab.py")
    if os.environ.get("CI"):
        pytest.fail(msg + " [CI is set: missing tools are a failure]", pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def lab_image():
    """The cached kernel + initramfs, built on first use."""
    _require_tools()
    t0 = time.monotonic()
    image = lab.build(log=lambda s: print(s, file=sys.stderr))
    _timings.append(("image build or cache hit", time.monotonic() - t0))
    return image


def _boot(topology, image, tmp_path_factory):
    workdir = tmp_path_factory.mktemp(f"lab-{topology}")
    guest = lab.Guest(topology, image=image, workdir=workdir)
    try:
        guest.start()
    except Exception:
        guest.stop()
        raise
    _timings.append((f"boot {topology} (guest ready)", guest.boot_seconds))
    return guest


@pytest.fixture(scope="module")
def nvme_guest(lab_image, tmp_path_factory):
    guest = _boot("nvme", lab_image, tmp_path_factory)
    yield guest
    guest.stop()


@pytest.fixture(scope="module")
def sas_guest(lab_image, tmp_path_factory):
    guest = _boot("sas", lab_image, tmp_path_factory)
    yield guest
    guest.stop()


@pytest.fixture(scope="module")
def md_guest(lab_image, tmp_path_factory):
    guest = _boot("md", lab_image, tmp_path_factory)
    yield guest
    guest.stop()
