"""Shared test fixtures: fixture machines built on demand, and a real `storpath serve`."""

from __future__ import annotations

import logging
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from typing import Iterator, List, Optional

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.fixtures import machines  # noqa: E402
from tests.processes import wait_until_answers  # noqa: E402

IN_CI = bool(os.environ.get("CI"))

# Property-based tests (tests/unit/test_properties_*.py): a bounded budget in the quick
# tier, a deeper search in CI. STORPATH_HYPOTHESIS_PROFILE picks one by hand.
try:
    from hypothesis import HealthCheck, settings as hypothesis_settings
except ImportError:  # hypothesis comes with the test extra; without it those modules fail to import
    pass
else:
    hypothesis_settings.register_profile("quick", max_examples=50, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
    hypothesis_settings.register_profile("ci", max_examples=400, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
    hypothesis_settings.load_profile(os.environ.get("STORPATH_HYPOTHESIS_PROFILE") or ("ci" if IN_CI else "quick"))


def require_tool(name: str, package: str) -> str:
    """The path of a tool a test needs. Missing in CI is a failure (CI installs it);
    missing on a developer's machine is a skip that says what to install."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} not found: install Debian's {package} package (scripts/setup-system does)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def require_root(what: str) -> None:
    """Tests that attach loop devices or build md arrays need root. CI runs as root, so
    there a missing root is a failure, not a skip that hides a whole tier."""
    if os.geteuid() == 0:
        return
    message = f"{what} needs root"
    if IN_CI:
        pytest.fail(f"{message}, and CI must run it: run CI as root")
    pytest.skip(message)


@contextmanager
def log_records(name: str):
    """Records logged to `name` (and below), at every level, whatever else is configured."""
    records = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    logger = logging.getLogger(name)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def stop_process(proc: subprocess.Popen, grace: float = 10) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; always reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


RAM_FOLDER = "/dev/shm"


def _ram_backed(need_bytes: int) -> Optional[str]:
    """A folder on a tmpfs with room for `need_bytes` twice over, or None."""
    try:
        with open("/proc/self/mounts", encoding="utf-8") as handle:
            if not any(line.split()[1:3] == [RAM_FOLDER, "tmpfs"] for line in handle):
                return None
        found = os.statvfs(RAM_FOLDER)
    except OSError:
        return None
    return RAM_FOLDER if found.f_bavail * found.f_frsize >= 2 * need_bytes else None


def _remove_orphans(ram: str) -> None:
    """What a killed session left in `ram` (its process is gone)."""
    for name in os.listdir(ram):
        parts = name.split("-")
        if name.startswith("storpath-tests-") and len(parts) > 3 and parts[2].isdigit() \
                and not os.path.exists(f"/proc/{parts[2]}"):
            shutil.rmtree(os.path.join(ram, name), ignore_errors=True)


@pytest.fixture(scope="session")
def tree_folder(tmp_path_factory):
    """folder(name, need_bytes) -> a new empty folder for a tree of many small files that tests
    read as a machine's sysfs (a fixture machine, a synthetic host). On a tmpfs (/dev/shm) with
    room for it, where such a tree is built about four times faster than on an ext4 disk (every
    fixture machine: 4 s against 15-37 s; a 2048-function host: 6-7 s against 31-64 s, on the
    2-core VM, 2026-11-30), removed with everything else there when the session ends (pytest
    keeps its own folders for three sessions, and deletes them on the disk later); elsewhere a
    folder of pytest's. Not for files the product must take for a regular file's (a probe's
    target: it refuses paths under /dev)."""
    session: Optional[str] = None  # this session's folder on the tmpfs, made when first needed

    def folder(name: str, need_bytes: int) -> str:
        nonlocal session
        ram = _ram_backed(need_bytes)
        if ram is None:
            return str(tmp_path_factory.mktemp(name))
        if session is None:
            _remove_orphans(ram)
            session = tempfile.mkdtemp(prefix=f"storpath-tests-{os.getpid()}-", dir=ram)
        return tempfile.mkdtemp(prefix=name + "-", dir=session)

    try:
        yield folder
    finally:
        if session is not None:
            shutil.rmtree(session, ignore_errors=True)


@pytest.fixture(scope="session")
def machine_tree(tree_folder):
    """build(name, variant) -> root folder holding sys/ and proc/ of that fixture machine."""
    cache = {}

    def build(name: str, variant: str) -> str:
        key = (name, variant)
        if key not in cache:
            root = tree_folder(f"{name}-{variant}", 64 << 20)
            machines.load(name).build(root, variant)
            cache[key] = root
        return cache[key]

    return build


@pytest.fixture(scope="session")
def synthetic_host(tree_folder):
    """host(functions) -> the root of the scrape benchmark's host of that many PCI functions
    (NVMe drives, each below a root port of its own: benchmarks/scrape.py's `ports` layout),
    built once per session (hundreds of thousands of small files: `tree_folder`)."""
    from benchmarks.scrape import build_host  # (it imports this module: loaded once the session runs)

    built = {}

    def host(functions: int) -> str:
        if functions not in built:
            root = tree_folder(f"host{functions}", functions * 200 * 1024)  # about 170 KiB of 4 KiB pages each
            assert build_host(root, functions // 2, "ports") == functions
            built[functions] = root
        return built[functions]

    return host


class RunningExporter:
    def __init__(self, proc: subprocess.Popen, port: int, log_path: str, ca: Optional[str] = None,
                 auth: Optional[tuple] = None, cert: Optional[tuple] = None):
        self.proc = proc
        self.port = port
        self.url = f"{'https' if ca else 'http'}://127.0.0.1:{port}"
        self.log_path = log_path
        self.ca = ca  # serving TLS: the CA that signed its certificate
        self.auth = auth  # basic auth (user, password) sent by default
        self.cert = cert  # client certificate (cert file, key file) presented by default

    def get(self, path: str = "/metrics", headers: Optional[dict] = None, **kwargs):
        import requests

        kwargs.setdefault("auth", self.auth)
        kwargs.setdefault("verify", self.ca or True)
        kwargs.setdefault("cert", self.cert)
        kwargs.setdefault("timeout", 10)
        return requests.get(self.url + path, headers=headers or {}, **kwargs)

    def metrics(self) -> str:
        response = self.get("/metrics")
        response.raise_for_status()
        return response.text

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as handle:
            return handle.read()


@contextmanager
def run_exporter(args: List[str], tmp_dir: str, env: Optional[dict] = None, ca: Optional[str] = None,
                 auth: Optional[tuple] = None, cert: Optional[tuple] = None,
                 open_files: Optional[tuple] = None) -> Iterator[RunningExporter]:
    """Start the real `storpath serve` as a process and wait until it answers (over TLS
    checked against `ca`, with basic auth `auth` and client certificate `cert` when given,
    under RLIMIT_NOFILE `open_files` (soft, hard) when given)."""
    port = free_port()
    log_path = os.path.join(tmp_dir, f"storpath-{port}.log")
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.path.join(ROOT, "exporter") + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "storpath", "serve", f"--web.listen-address=127.0.0.1:{port}",
                                 *args], stdout=log_file, stderr=subprocess.STDOUT, env=full_env,
                                preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, open_files))
                                if open_files else None)
    exporter = RunningExporter(proc, port, log_path, ca, auth, cert)
    try:
        wait_until_answers(proc, "/-/healthy", "storpath", exporter.log, get=exporter.get)
        yield exporter
    finally:
        stop_process(proc)


@pytest.fixture
def exporter_on(tmp_path, machine_tree):
    """exporter_on(name, variant, *extra_args) -> context manager of a RunningExporter."""

    def start(name: str, variant: str, *extra: str, env: Optional[dict] = None, **kwargs):
        root = machine_tree(name, variant)
        args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured", *extra]
        return run_exporter(args, str(tmp_path), env=env, **kwargs)

    return start
