"""A password over 72 bytes, checked against the hash htpasswd made of it, as Prometheus
sends it and exporter-toolkit accepts it: with every bcrypt pyproject.toml allows that
matters (the venv's, the other major version of 4 and 5, Debian's python3-bcrypt).

bcrypt 5 raises on a password over 72 bytes where 4 and 3 cut it; htpasswd (and Go's
bcrypt) use the first 72 bytes. The venv holds one version: the other major version is
installed with pip into a cache folder and run in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import IN_CI, ROOT, require_tool

EXPORTER = os.path.join(ROOT, "exporter")
# The newest of each major version storpath supports (pyproject.toml: bcrypt>=3.2,<6).
OTHER_MAJOR = {4: "5.0.0", 5: "4.3.0"}

CHECK = """
import json, sys
import bcrypt
from storpath.http import webconfig
hashed, passwords = json.loads(sys.argv[1])
auth = webconfig.Authenticator({"prom": hashed.encode()})
print(json.dumps({"version": bcrypt.__version__,
                  "checks": {name: auth.check("prom", password) for name, password in passwords.items()}}))
"""

LONG = "Prometheus-scrapes-this-host-with-a-generated-password-0123456789abcdefghijklmnopqrstuvwxyz-ABCDEFGH"
assert len(LONG.encode()) == 100
# 71 ASCII bytes, then two-byte characters: the 72nd byte is the first half of one.
SPLIT = "s" * 71 + "é" * 15


def htpasswd(password: str) -> str:
    """The hash `htpasswd -B` makes of `password` (cost 4: the check is what is tested)."""
    tool = require_tool("htpasswd", "apache2-utils")
    line = subprocess.run([tool, "-nbBC", "4", "prom", password], capture_output=True, text=True, check=True,
                          timeout=30).stdout
    return line.strip().split(":", 1)[1]


@pytest.fixture(scope="module")
def hashes():
    return {"long": htpasswd(LONG), "split": htpasswd(SPLIT)}


def _check(python: str, path: list, hashed: str, passwords: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path + [EXPORTER]))
    result = subprocess.run([python, "-c", CHECK, json.dumps([hashed, passwords])], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


class _Folders:
    """Where to install: pytest's cache (kept between runs), or a temporary folder of this
    session when the cache plugin is off (`-p no:cacheprovider`)."""

    def __init__(self, factory):
        self.factory = factory

    def mkdir(self, name: str):
        return self.factory.mktemp(name, numbered=False)


def _cache(request):
    cache = getattr(request.config, "cache", None)
    return cache if cache is not None else _Folders(request.config._tmp_path_factory)


def _other_major(cache) -> str:
    """A folder holding the other major version of bcrypt than the venv's, installed once
    per cache (pip install --target; into a fresh folder, then renamed into place)."""
    import bcrypt

    version = OTHER_MAJOR[int(bcrypt.__version__.split(".")[0])]
    folder = str(cache.mkdir(f"bcrypt-{version}"))
    if os.path.exists(os.path.join(folder, "bcrypt", "__init__.py")):
        return folder
    staging = f"{folder}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                             "--only-binary=:all:", "--target", staging, f"bcrypt=={version}"],
                            capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        message = f"cannot install bcrypt {version} from PyPI: {result.stderr.strip()[-400:]}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    os.rmdir(folder)
    os.rename(staging, folder)
    return folder


def _implementation(which: str, request):
    """(python, extra sys.path, the bcrypt major version it must have)."""
    import bcrypt

    venv_major = int(bcrypt.__version__.split(".")[0])
    if which == "venv":
        return sys.executable, [], venv_major
    if which == "other major":
        return sys.executable, [_other_major(_cache(request))], 9 - venv_major
    # Debian's python3 with python3-bcrypt (scripts/apt-packages.txt): bookworm's 3.2.2.
    debian = "/usr/bin/python3"
    probe = subprocess.run([debian, "-c", "import bcrypt, yaml"], capture_output=True, timeout=60) \
        if os.path.exists(debian) else None
    if probe is None or probe.returncode != 0:
        message = "Debian's python3 with python3-bcrypt and python3-yaml is missing (scripts/setup-system)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return debian, [], 3


@pytest.mark.parametrize("which", ["venv", "other major", "debian"])
def test_a_password_over_72_bytes_matches_the_hash_htpasswd_made(which, hashes, request):
    python, path, major = _implementation(which, request)
    first72 = LONG.encode()[:72].decode()
    got = _check(python, path, hashes["long"], {
        "full": LONG,  # what Prometheus sends
        "first 72 bytes": first72,  # Go's bcrypt accepts it too
        "other end": first72 + "x" * 28,  # differs past byte 72 only: the same key
        "wrong": "p" + LONG[1:],  # differs in the first byte
        "shorter": LONG[:71],
    })
    assert int(got["version"].split(".")[0]) == major, got
    assert got["checks"] == {"full": True, "first 72 bytes": True, "other end": True, "wrong": False,
                             "shorter": False}
    # The cut falls inside a two-byte character: cut as bytes, as htpasswd and Go do.
    got = _check(python, path, hashes["split"], {"full": SPLIT, "wrong": "t" + SPLIT[1:]})
    assert got["checks"] == {"full": True, "wrong": False}
