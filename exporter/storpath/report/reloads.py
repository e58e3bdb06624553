"""Whether the configuration `storpath serve` runs is the one on disk: the outcome of the last
load (at start, and on each SIGHUP) as two metrics, named as Prometheus and Alertmanager name
theirs, so one alert rule covers them all:

    storpath_config_last_reload_successful == 0

A reload that fails keeps the running configuration (the reason is logged), so without them
a rotated certificate or a removed password that never applied would show nowhere."""

from __future__ import annotations

import threading
import time
from typing import Optional, Tuple

from storpath.scrape.families import GAUGE, Family, Rows

LAST_RELOAD_SUCCESSFUL = Family(
    "storpath_config_last_reload_successful", GAUGE,
    "Whether the last configuration load (at start or on SIGHUP) succeeded (1) or failed (0).",
    doc="1 if the configuration files (`--config.file`, `--web.config.file`) were last loaded without error, at "
        "start or on SIGHUP; 0 if the last reload failed and the running configuration was kept (the reason is "
        "logged)")
LAST_RELOAD_SUCCESS_TIMESTAMP = Family(
    "storpath_config_last_reload_success_timestamp_seconds", GAUGE,
    "When the configuration was last loaded successfully, in seconds since the epoch.", (), "seconds",
    doc="Unix time of the last successful load of the configuration, at start or on SIGHUP")
WEB_INFO = Family(
    "storpath_web_info", GAUGE,
    "How this exporter serves HTTP: the URL scheme its pages (the runbooks among them) answer on, and whether they "
    "ask for a password; always 1.", ("scheme", "basic_auth"),
    doc="always 1; `scheme` `https` when `--web.config.file` sets `tls_server_config`, else `http`; `basic_auth` "
        "`true` when it sets `basic_auth_users`. The rules' default runbook links take the scheme from it, so that "
        "they open on an exporter that serves TLS")

FAMILIES = (LAST_RELOAD_SUCCESSFUL, LAST_RELOAD_SUCCESS_TIMESTAMP, WEB_INFO)


class ReloadStatus:
    """The outcome of the last configuration load, shared by every configuration built in
    the process (a reload builds new collectors; the status outlives them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._successful: Optional[bool] = None
        self._success_time: Optional[float] = None
        self._web: Optional[Tuple[str, str]] = None

    def record(self, successful: bool, now: Optional[float] = None, tls: Optional[bool] = None,
               basic_auth: Optional[bool] = None) -> None:
        """A load's outcome; a successful one gives how the pages are now served (`tls`,
        `basic_auth`), which a failed one leaves as they were."""
        with self._lock:
            self._successful = successful
            if successful:
                self._success_time = time.time() if now is None else now
                if tls is not None:
                    self._web = ("https" if tls else "http", "true" if basic_auth else "false")

    def rows(self) -> Rows:
        """The families' rows; none before the first load is recorded."""
        rows = Rows()
        with self._lock:
            successful, when, web = self._successful, self._success_time, self._web
        if successful is not None:
            rows.add(LAST_RELOAD_SUCCESSFUL, (), 1.0 if successful else 0.0)
        if when is not None:
            rows.add(LAST_RELOAD_SUCCESS_TIMESTAMP, (), when)
        if web is not None:
            rows.add(WEB_INFO, web, 1.0)
        return rows
