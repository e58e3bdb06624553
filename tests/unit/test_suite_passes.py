"""scripts/test's two passes: what runs on every core and what runs one test at a time.

The first pass (pytest-xdist) must hold none of the tests that measure time or load, make load,
drive containers or QEMU, or share one costly fixture per process; the second must hold each of
them. Read from pytest's own collection with the marker expression scripts/test uses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import ALONE

ROOT = Path(__file__).resolve().parents[2]


def _script_variable(name: str) -> str:
    """A marker expression scripts/test sets (NAME="...")."""
    found = re.search(rf'^{name}="([^"]+)"$', (ROOT / "scripts" / "test").read_text(), re.M)
    assert found, f"scripts/test sets no {name}"
    return found.group(1)


def _serial_expression() -> str:
    return _script_variable("SERIAL")


def _collected(*args: str) -> list:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_every_module_named_alone_exists():
    e2e = ROOT / "tests" / "e2e"
    assert [name for name in ALONE if not (e2e / f"{name}.py").is_file()] == []


def test_the_first_pass_holds_no_test_that_must_run_alone():
    serial = _serial_expression()
    first = _collected("-m", f"not ({serial})", "tests/e2e", "tests/dashboards", "tests/packaging",
                       "tests/integration", "tests/lab", "tests/unit/test_serving.py")
    files = {line.split("::")[0] for line in first}
    wrong = sorted(f for f in files if f.startswith(("tests/packaging/", "tests/integration/")) or Path(f).stem in ALONE)
    assert wrong == []
    # The lab's tests that boot a guest are lab tests (tests/lab/conftest.py); those that read
    # the guests' captures only are not, and run on every core.
    assert not {f for f in files if f.startswith("tests/lab/")} & {"tests/lab/test_lab_boot.py", "tests/lab/test_lab_exporter.py"}
    # The dashboards that query the fleet run in the second pass; their static checks in the first.
    assert "tests/dashboards/test_dashboard_values.py" not in files
    assert "tests/dashboards/test_conventions.py" in files
    # What compares outputs only stays on every core, and so do the unit tests.
    assert {"tests/e2e/test_golden.py", "tests/e2e/test_capture.py", "tests/unit/test_serving.py"} <= files


def test_the_second_pass_lanes_split_it_exactly():
    """Each test of the second pass runs in exactly one of its three lanes, whatever marks it has
    (evaluated with pytest's own marker expressions over every combination of the marks)."""
    import itertools

    from _pytest.mark.expression import Expression

    text = (ROOT / "scripts" / "test").read_text()
    lanes = {name: _script_variable(name) for name in ("LAB_LANE", "INTEGRATION_LANE", "ALONE_LANE")}
    for name in lanes:  # each lane is run
        assert f'-m "${name}"' in text, name
    serial = Expression.compile(_serial_expression())
    compiled = {name: Expression.compile(expression) for name, expression in lanes.items()}
    marks = ("integration", "lab", "alone", "other")
    for present in itertools.product((False, True), repeat=len(marks)):
        have = {mark for mark, on in zip(marks, present) if on}
        matcher = lambda name, **kwargs: name in have  # noqa: E731
        inside = [name for name, expression in compiled.items() if expression.evaluate(matcher)]
        assert len(inside) == (1 if serial.evaluate(matcher) else 0), (have, inside)
