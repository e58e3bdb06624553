"""requires-python says what is true: the suite runs on that version or later, and no
source file uses syntax newer than it claims."""

import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _minimum():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as handle:
        match = re.search(r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)"', handle.read(), re.M)
    assert match, "pyproject.toml states no requires-python of the form >=X.Y"
    return int(match.group(1)), int(match.group(2))


def test_the_suite_runs_on_the_claimed_python():
    assert sys.version_info[:2] >= _minimum()
    if os.environ.get("CI"):
        # CI runs the oldest Python claimed, so the claim is the tested one.
        assert sys.version_info[:2] == _minimum(), f"CI runs {sys.version_info[:2]}, pyproject claims {_minimum()}"


def test_no_source_needs_a_newer_python_than_claimed():
    minimum = _minimum()
    parsed = 0
    for folder, _, files in os.walk(os.path.join(ROOT, "exporter", "storpath")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as handle:
                    # A SyntaxError here names the file and the construct newer than the claim.
                    assert isinstance(ast.parse(handle.read(), path, feature_version=minimum), ast.Module)
                parsed += 1
    assert parsed > 50, f"only {parsed} source files found under exporter/storpath"
