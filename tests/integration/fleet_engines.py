"""The central side of a fleet as local processes: Prometheus (full or agent), VictoriaMetrics
single node and vmalert from Debian's packages, and the dashboards' panel queries read from
dashboards/*.json. Used by tests/integration/test_fleet_*.py and benchmarks/fleet.py.

Every engine runs as a host process on 127.0.0.1 whatever STORPATH_IT_MODE says: no image
carries VictoriaMetrics, and a process starts in about a second.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import urllib.parse
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

import yaml

from .harness import REPO, Missing, Prometheus, Service, _start_process, free_port

PROMETHEUS = "/usr/bin/prometheus"
VICTORIA_METRICS = "/usr/bin/victoria-metrics"
VMALERT = "/usr/bin/vmalert"
DASHBOARDS = REPO / "dashboards"


def require(*binaries: str) -> None:
    missing = [b for b in binaries if not shutil.which(b)]
    if missing:
        raise Missing(f"not installed: {', '.join(missing)} (Debian packages prometheus, victoria-metrics; "
                      "scripts/setup-system installs them)")


class Engines:
    """Starts engines in ``workdir``; ``close()`` stops them all (in reverse order)."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self._stops: list = []
        self._n = 0

    def _dir(self, name: str) -> Path:
        self._n += 1
        d = self.workdir / f"{self._n:02d}-{name}"
        d.mkdir(parents=True)
        return d

    def _start(self, name: str, argv: list, d: Path, port: int, cls: type) -> Any:
        svc = _start_process(name, argv, d, port, cls)
        self._stops.append(svc.stop)
        return svc

    def close(self) -> None:
        while self._stops:
            self._stops.pop()()

    def prometheus(self, config: dict, agent: bool = False, rules: Iterable[Path] = (),
                   extra_args: Iterable[str] = (), port: Optional[int] = None,
                   timeout: float = 60) -> "CentralPrometheus":
        """Prometheus with ``config`` (rule files added from ``rules``); ``agent``: agent mode."""
        require(PROMETHEUS)
        d = self._dir("prometheus-agent" if agent else "prometheus")
        config = dict(config)
        if rules:
            config["rule_files"] = [str(p) for p in rules]
        (d / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        port = port or free_port()
        argv = [PROMETHEUS, f"--config.file={d / 'prometheus.yml'}", f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle", "--log.level=warn"]
        if agent:
            argv += ["--enable-feature=agent", f"--storage.agent.path={d / 'data'}"]
        else:
            argv += [f"--storage.tsdb.path={d / 'data'}"]
        svc = self._start("prometheus", argv + list(extra_args), d, port, CentralPrometheus)
        return svc.wait_ready("/-/ready", timeout)

    def victoria_metrics(self, timeout: float = 30) -> "CentralPrometheus":
        """A single-node VictoriaMetrics taking remote_write at /api/v1/write and answering PromQL."""
        require(VICTORIA_METRICS)
        d = self._dir("victoria-metrics")
        port = free_port()
        argv = [VICTORIA_METRICS, f"-storageDataPath={d / 'data'}", f"-httpListenAddr=127.0.0.1:{port}",
                # By default instant queries do not see the last 30 s (samples still arriving);
                # a test that writes and reads within seconds must see them.
                "-search.latencyOffset=1s", "-search.disableCache", "-loggerLevel=WARN"]
        svc = self._start("victoria-metrics", argv, d, port, CentralPrometheus)
        return svc.wait_ready("/health", timeout)

    def vmalert(self, datasource: Service, rules: Iterable[Path], notifier: Optional[Service] = None,
                interval: str = "1s", timeout: float = 30) -> "VmAlert":
        """vmalert evaluating ``rules`` over ``datasource``, writing recorded series and alert state
        back to it, sending alerts to ``notifier`` (an Alertmanager)."""
        require(VMALERT)
        d = self._dir("vmalert")
        port = free_port()
        argv = [VMALERT, *[f"-rule={p}" for p in rules], f"-datasource.url={datasource.url}",
                f"-remoteWrite.url={datasource.url}", f"-evaluationInterval={interval}",
                f"-httpListenAddr=127.0.0.1:{port}", "-remoteWrite.flushInterval=1s", "-loggerLevel=WARN",
                f"-notifier.url={notifier.url if notifier else 'http://127.0.0.1:1'}"]
        svc = self._start("vmalert", argv, d, port, VmAlert)
        return svc.wait_ready("/-/healthy", timeout)


class CentralPrometheus(Prometheus):
    """Prometheus's HTTP API, also as VictoriaMetrics answers it."""

    def query_at(self, expr: str, at: float) -> list:
        q = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
        body = self.get_json(f"/api/v1/query?{q}")
        if body.get("status") != "success":
            raise ValueError(f"{self.name}: {expr}: {body}")
        return body["data"]["result"]


class VmAlert(Service):
    def alerts(self) -> list:
        return self.get_json("/api/v1/alerts")["data"]["alerts"] or []

    def groups(self) -> list:
        return self.get_json("/api/v1/rules")["data"]["groups"]


# --------------------------------------------------------------------------- dashboards


# Grafana's variables as a query of every host sees them: all jobs, all instances, all devices.
_VARIABLE_MATCHER = re.compile(r'(=~|!~|=|!=)\s*"\$\{?(\w+)\}?"')
_INTERVALS = {"__rate_interval": "1m", "__interval": "15s", "__range": "1h"}


def grafana_to_promql(expr: str) -> str:
    """A panel's query with Grafana's variables replaced as "All" selects them."""
    expr = _VARIABLE_MATCHER.sub(lambda m: '=~".*"' if m.group(1) in ("=", "=~") else '!~""', expr)
    for name, value in _INTERVALS.items():
        expr = re.sub(r"\$\{?" + name + r"\}?", value, expr)
    if "$" in expr:
        raise ValueError(f"a Grafana variable left in {expr!r}")
    return expr


def panel_queries(folder: Path = DASHBOARDS) -> list[tuple[str, str, str]]:
    """(dashboard uid, panel title / refId, PromQL) of every panel query of dashboards/*.json."""
    out = []
    for path in sorted(folder.glob("*.json")):
        doc = json.loads(path.read_text())
        for panel in _panels(doc):
            for target in panel.get("targets") or []:
                if isinstance(target.get("expr"), str) and target["expr"].strip():
                    out.append((doc.get("uid", path.stem), f"{panel.get('title', '?')} / {target.get('refId', '?')}",
                                grafana_to_promql(target["expr"])))
    return out


def _panels(node: Any) -> Iterator[dict]:
    if isinstance(node, dict):
        if "targets" in node:
            yield node
        for key in ("panels", "rows"):
            for child in node.get(key) or []:
                yield from _panels(child)
    elif isinstance(node, list):
        for child in node:
            yield from _panels(child)


def samples(result: list, drop: Iterable[str] = ("__name__",)) -> dict:
    """{frozenset of labels: value} of an instant-query answer, without the labels in ``drop``."""
    out = {}
    for series in result:
        labels = frozenset((k, v) for k, v in series["metric"].items() if k not in drop)
        out[labels] = float(series["value"][1])
    return out


def same_samples(a: dict, b: dict, rel: float = 1e-6) -> bool:
    if set(a) != set(b):
        return False
    return all(math.isclose(a[k], b[k], rel_tol=rel) or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)
