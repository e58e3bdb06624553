"""Run Prometheus, Alertmanager, node_exporter and the storpath exporter for integration tests.

Two interchangeable back ends, chosen with STORPATH_IT_MODE:

* ``containers`` (default): the images built by deploy/container/build-base-images, started as
  testcontainers containers on the Docker engine of scripts/docker-daemon, with host networking;
* ``processes``: the same Debian binaries (/usr/bin/prometheus, /usr/bin/prometheus-alertmanager,
  /usr/bin/prometheus-node-exporter) as local subprocesses.

Every service listens on 127.0.0.1 at a free port in both modes, so a scrape config written by a
test ("127.0.0.1:PORT") means the same thing whichever back end runs it, and a Prometheus in a
container can scrape an exporter that runs as a host process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import yaml

from tests.conftest import stop_process

REPO = Path(__file__).resolve().parents[2]
DOCKER_DAEMON = REPO / "scripts" / "docker-daemon"
BUILD_IMAGES = REPO / "deploy" / "container" / "build-base-images"

PREFIX = os.environ.get("STORPATH_IMAGE_PREFIX", "local/")
IMAGES = {
    "storpath": f"{PREFIX}storpath:latest",
    "prometheus": f"{PREFIX}prometheus:bookworm",
    "alertmanager": f"{PREFIX}alertmanager:bookworm",
    "node-exporter": f"{PREFIX}node-exporter:bookworm",
}
BINARIES = {
    "prometheus": "/usr/bin/prometheus",
    "alertmanager": "/usr/bin/prometheus-alertmanager",
    "node-exporter": "/usr/bin/prometheus-node-exporter",
}
# uid:gid the storpath image runs as (deploy/container/Dockerfile).
STORPATH_UID = 9866


class Missing(Exception):
    """A piece the tests need is not there (binary, engine, image, exporter)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.25,
               diagnostics: Callable[[], str] = lambda: "") -> Any:
    """Call ``check`` until it returns something truthy; raise with ``diagnostics()`` on timeout."""
    deadline = time.monotonic() + timeout
    last_error: Optional[BaseException] = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (OSError, urllib.error.URLError, ValueError, KeyError) as e:
            last_error = e
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}"
                       f"{f' (last error: {last_error})' if last_error else ''}\n{diagnostics()}")


def readable_copy(src: Path, dest: Path) -> Path:
    """Make ``dest`` a world-readable copy of ``src`` (file or tree), for non-root container users."""
    if src.is_dir():
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
    make_world_readable(dest)
    return dest


def make_world_readable(path: Path) -> None:
    paths = [path] + (list(path.rglob("*")) if path.is_dir() else [])
    for p in paths:
        if p.is_symlink():
            continue
        p.chmod(0o755 if p.is_dir() else 0o644)


def exporter_present() -> bool:
    """True once the exporter package has its command-line entry point (storpath.cli)."""
    return (REPO / "exporter" / "storpath" / "cli.py").is_file() or \
        (REPO / "exporter" / "storpath" / "cli" / "__init__.py").is_file()


def exporter_command() -> list[str]:
    """How to start the exporter on the host: the console script of the environment that runs
    the tests (the checkout's .venv), else the package this interpreter imports. Never a
    `storpath` found on PATH: that is whatever checkout was installed last (README's install
    links one into /usr/local/bin), not necessarily the one under test."""
    script = Path(sys.executable).with_name("storpath")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-c", "import sys; from storpath.cli import main; sys.exit(main())"]


# --------------------------------------------------------------------------- services


@dataclass
class Service:
    """A running service: where it answers and how to read its logs."""

    name: str
    port: int
    logs: Callable[[], str]
    stop: Callable[[], None]
    extra: dict = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        return http_get(self.url + path, timeout)

    def get_json(self, path: str) -> Any:
        status, body = self.get(path)
        if status != 200:
            raise ValueError(f"{self.name} {path}: HTTP {status}: {body[:300]}")
        return json.loads(body)

    def wait_ready(self, path: str, timeout: float = 30.0) -> "Service":
        wait_until(lambda: self.get(path, timeout=2)[0] == 200, timeout,
                   f"{self.name} at {self.url}{path}", diagnostics=self.logs)
        return self


class Prometheus(Service):
    def query(self, expr: str) -> list:
        q = urllib.parse.urlencode({"query": expr})
        return self.get_json(f"/api/v1/query?{q}")["data"]["result"]

    def targets(self) -> list:
        return self.get_json("/api/v1/targets")["data"]["activeTargets"]

    def alerts(self) -> list:
        return self.get_json("/api/v1/alerts")["data"]["alerts"]

    def wait_targets_up(self, jobs: Iterable[str], timeout: float = 60.0) -> list:
        jobs = set(jobs)

        def check():
            ts = self.targets()
            up = {t["labels"]["job"] for t in ts if t["health"] == "up"}
            return ts if jobs <= up else None

        return wait_until(check, timeout, f"targets {sorted(jobs)} up",
                          diagnostics=lambda: json.dumps(self.targets(), indent=1)[:3000] + "\n" + self.logs())


class Alertmanager(Service):
    def alerts(self) -> list:
        return self.get_json("/api/v2/alerts")

    def wait_alert(self, alertname: str, timeout: float = 90.0) -> dict:
        def check():
            for a in self.alerts():
                if a["labels"].get("alertname") == alertname:
                    return a
            return None

        return wait_until(check, timeout, f"alert {alertname} in Alertmanager", interval=0.5,
                          diagnostics=self.logs)


import urllib.parse  # noqa: E402  (used by Prometheus.query)


# --------------------------------------------------------------------------- configuration


def prometheus_config(jobs: dict[str, list[str]], rule_files: Iterable[str] = (),
                      alertmanagers: Iterable[str] = (), interval: str = "1s",
                      evaluation_interval: str = "1s") -> dict:
    """A Prometheus configuration: one static job per entry of ``jobs`` (name -> ["host:port", ...])."""
    glob = {"scrape_interval": interval, "evaluation_interval": evaluation_interval}
    short = re.fullmatch(r"(\d+(?:\.\d+)?)s", interval)
    if short and float(short.group(1)) < 10:  # the default timeout (10s) may not exceed the interval
        glob["scrape_timeout"] = interval
    cfg: dict[str, Any] = {
        "global": glob,
        "scrape_configs": [{"job_name": j, "static_configs": [{"targets": list(t)}]} for j, t in jobs.items()],
    }
    if rule_files:
        cfg["rule_files"] = list(rule_files)
    if alertmanagers:
        cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": list(alertmanagers)}]}]}
    return cfg


def copy_rules(dest: Path, src: Path = REPO / "rules") -> set[str]:
    """Copy src/*.yml to ``dest`` with every `for:` (and group interval) removed, so alerts fire on
    the first evaluation.

    Returns the names of the alerts on PCIe link speed or width (the fault of the generated fixture
    tree); a rules folder without one is an error, since the tests built on it would prove nothing.
    """
    dest.mkdir(parents=True, exist_ok=True)
    link_alerts: set[str] = set()
    for path in sorted(list(src.glob("*.yml")) + list(src.glob("*.yaml"))):
        doc = yaml.safe_load(path.read_text()) or {}
        for group in doc.get("groups") or []:
            group.pop("interval", None)  # the capacity group's 5 m: here every group runs at the test's pace
            for rule in group.get("rules") or []:
                expr = str(rule.get("expr", ""))
                # An alert on an absent `up` (StorpathTargetAbsent) is true until the first scrape:
                # it keeps its `for:`, or it would fire at every start.
                if not expr.startswith("absent("):
                    rule.pop("for", None)
                rule.pop("keep_firing_for", None)
                if "alert" in rule and re.search(r"storpath_pcie_current_link_(speed|width)\b", expr) \
                        and "changes(" not in expr:
                    link_alerts.add(rule["alert"])
        (dest / path.name).write_text(yaml.safe_dump(doc, sort_keys=False))
    if not link_alerts:
        raise ValueError(f"{src} has no alert on storpath_pcie_current_link_speed or _width")
    make_world_readable(dest)
    return link_alerts


ALERTMANAGER_CONFIG = {
    "route": {"receiver": "null", "group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"},
    "receivers": [{"name": "null"}],
}


# --------------------------------------------------------------------------- back ends


class Backend:
    """Starts services; subclasses decide whether as containers or as processes."""

    mode = "?"

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self._stops: list[Callable[[], None]] = []
        self._n = 0

    def _dir(self, name: str) -> Path:
        self._n += 1
        d = self.workdir / f"{self._n:02d}-{name}"
        d.mkdir(parents=True)
        d.chmod(0o755)
        return d

    def close(self) -> None:
        while self._stops:
            try:
                self._stops.pop()()
            except Exception as e:  # keep stopping the rest
                print(f"harness: stopping a service failed: {e}", file=sys.stderr)

    # Each returns a ready Service.
    def prometheus(self, config: dict, rules_dir: Optional[Path] = None, timeout: float = 60) -> Prometheus:
        """Start Prometheus with ``config``; ``rules_dir`` is mounted and its *.yml/*.yaml loaded."""
        d = self._dir("prometheus")
        config = dict(config)
        if rules_dir is not None:
            readable_copy(Path(rules_dir), d / "rules")
            config["rule_files"] = list(config.get("rule_files", [])) + [
                f"{self._path(d, 'rules')}/*.yml", f"{self._path(d, 'rules')}/*.yaml"]
        (d / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        make_world_readable(d)
        port = free_port()
        args = [f"--config.file={self._path(d, 'prometheus.yml')}", f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle", "--log.level=info"]
        svc = self._run("prometheus", d, args, port, Prometheus, data_flag="--storage.tsdb.path")
        return svc.wait_ready("/-/ready", timeout)

    def alertmanager(self, config: Optional[dict] = None, timeout: float = 60) -> Alertmanager:
        d = self._dir("alertmanager")
        (d / "alertmanager.yml").write_text(yaml.safe_dump(config or ALERTMANAGER_CONFIG, sort_keys=False))
        make_world_readable(d)
        port = free_port()
        args = [f"--config.file={self._path(d, 'alertmanager.yml')}", f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address="]
        svc = self._run("alertmanager", d, args, port, Alertmanager, data_flag="--storage.path")
        return svc.wait_ready("/-/ready", timeout)

    def node_exporter(self, extra_args: Iterable[str] = (), timeout: float = 30) -> Service:
        d = self._dir("node-exporter")
        port = free_port()
        args = [f"--web.listen-address=127.0.0.1:{port}", *extra_args]
        svc = self._run("node-exporter", d, args, port, Service)
        return svc.wait_ready("/metrics", timeout)

    def host_exporter(self, sysfs: Path, procfs: Optional[Path] = None, dev: Optional[Path] = None,
                      extra_args: Iterable[str] = (), timeout: float = 30) -> Service:
        """The storpath exporter as a host process (same in both modes), on a fixture tree."""
        if not exporter_present():
            raise Missing("the storpath exporter is not implemented yet (no exporter/storpath/cli.py)")
        d = self._dir("storpath")
        port = free_port()
        args = ["serve", f"--web.listen-address=127.0.0.1:{port}", f"--path.sysfs={sysfs}"]
        if procfs is not None:
            args.append(f"--path.procfs={procfs}")
        if dev is not None:
            args.append(f"--path.dev={dev}")
        args += list(extra_args)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "exporter"), env.get("PYTHONPATH")]))
        svc = _start_process("storpath", exporter_command() + args, d, port, Service, env=env)
        self._stops.append(svc.stop)
        return svc.wait_ready("/metrics", timeout)

    # implemented by subclasses
    def _path(self, d: Path, name: str) -> str:
        raise NotImplementedError

    def _run(self, what: str, d: Path, args: list[str], port: int, cls: type, data_flag: str = "") -> Any:
        raise NotImplementedError


def _start_process(name: str, argv: list[str], d: Path, port: int, cls: type, env=None) -> Any:
    log = open(d / "output.log", "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=d, env=env)

    def logs() -> str:
        state = "running" if proc.poll() is None else f"exited with {proc.returncode}"
        return f"--- {name} ({state}): {' '.join(argv)}\n" + (d / "output.log").read_text(errors="replace")[-6000:]

    def stop() -> None:
        stop_process(proc)
        log.close()

    return cls(name=name, port=port, logs=logs, stop=stop, extra={"process": proc})


class ProcessBackend(Backend):
    """``binaries`` replaces some of BINARIES (Prometheus 3 built by scripts/go-tool, say)."""

    mode = "processes"

    def __init__(self, workdir: Path, binaries: Optional[dict] = None):
        super().__init__(workdir)
        self.binaries = {**BINARIES, **(binaries or {})}

    def _path(self, d: Path, name: str) -> str:
        return str(d / name)

    def _run(self, what, d, args, port, cls, data_flag=""):
        binary = self.binaries[what]
        if data_flag:
            (d / "data").mkdir()
            args = args + [f"{data_flag}={d / 'data'}"]
        svc = _start_process(what, [binary, *args], d, port, cls)
        self._stops.append(svc.stop)
        return svc


class ContainerBackend(Backend):
    """Containers with host networking; each service's work dir is mounted read-only at /work."""

    mode = "containers"

    def _path(self, d: Path, name: str) -> str:
        return f"/work/{name}"

    def _run(self, what, d, args, port, cls, data_flag=""):
        # The images' default data paths (/prometheus, /alertmanager) are writable by their user.
        return self.container(IMAGES[what], args, port, cls, name=what,
                              volumes=[(str(d), "/work", "ro")])

    def container(self, image: str, command: list[str], port: int, cls: type = Service, name: str = "",
                  volumes: Iterable[tuple[str, str, str]] = (), **kwargs) -> Any:
        """Start ``image`` with host networking, the given command, bind mounts (host, container, mode)."""
        from testcontainers.core.container import DockerContainer

        c = DockerContainer(image).with_command(command).with_kwargs(network_mode="host", **kwargs)
        for host, inside, mode in volumes:
            c = c.with_volume_mapping(host, inside, mode)
        c.start()

        def logs() -> str:
            try:
                c.get_wrapped_container().reload()
                state = c.get_wrapped_container().status
                out, err = c.get_logs()
                return f"--- container {image} ({state}) {command}\n" + \
                    (out + err).decode("utf-8", "replace")[-6000:]
            except Exception as e:  # the container may be gone already
                return f"--- container {image}: logs unavailable: {e}"

        def stop() -> None:
            c.stop()

        self._stops.append(stop)
        return cls(name=name or image, port=port, logs=logs, stop=stop, extra={"container": c})

    def storpath(self, sysfs: Path, procfs: Optional[Path] = None, extra_args: Iterable[str] = (),
                 timeout: float = 30, **kwargs) -> Service:
        """The storpath image on a fixture sysfs tree, mounted read-only at /host/sys like in production."""
        port = free_port()
        volumes = [(str(sysfs), "/host/sys", "ro")]
        args = ["serve", f"--web.listen-address=127.0.0.1:{port}", "--path.sysfs=/host/sys"]
        if procfs is not None:
            volumes.append((str(procfs), "/host/proc", "ro"))
            args.append("--path.procfs=/host/proc")
        args += list(extra_args)
        svc = self.container(IMAGES["storpath"], args, port, Service, name="storpath", volumes=volumes, **kwargs)
        return svc.wait_ready("/metrics", timeout)


# --------------------------------------------------------------------------- engine and images


def ensure_docker() -> str:
    """Make sure a Docker engine answers; start the private one when DOCKER_HOST is unset. Returns DOCKER_HOST."""
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")
    if not os.environ.get("DOCKER_HOST"):
        if not shutil.which("dockerd"):
            raise Missing("dockerd not installed (Debian package docker.io) and DOCKER_HOST unset")
        r = subprocess.run([str(DOCKER_DAEMON), "start"], capture_output=True, text=True)
        if r.returncode != 0:
            raise Missing(f"scripts/docker-daemon start failed: {r.stderr.strip()[-2000:]}")
        os.environ["DOCKER_HOST"] = r.stdout.strip().split("=", 1)[1]
    try:
        import docker
        docker.from_env().ping()
    except ImportError:
        raise Missing("the docker Python package is not installed (pip install testcontainers)")
    except Exception as e:
        raise Missing(f"Docker engine at {os.environ['DOCKER_HOST']} does not answer: {e}")
    try:
        import testcontainers  # noqa: F401
    except ImportError:
        raise Missing("testcontainers is not installed (pip install 'testcontainers>=4')")
    return os.environ["DOCKER_HOST"]


def build_images(names: Iterable[str] = ()) -> None:
    """Run deploy/container/build-base-images (cached base image, Docker layer cache for the rest)."""
    if os.environ.get("STORPATH_IT_BUILD", "1") == "0":
        import docker
        client = docker.from_env()
        for n in names or IMAGES:
            try:
                client.images.get(IMAGES[n])
            except Exception:
                raise Missing(f"image {IMAGES[n]} is missing and STORPATH_IT_BUILD=0 forbids building it")
        return
    r = subprocess.run([str(BUILD_IMAGES), *names], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"deploy/container/build-base-images failed:\n{r.stderr[-4000:]}")


def check_binaries() -> None:
    missing = [b for b in BINARIES.values() if not os.access(b, os.X_OK)]
    if missing:
        raise Missing(f"not installed: {', '.join(missing)} (Debian packages prometheus, "
                      "prometheus-alertmanager, prometheus-node-exporter)")
