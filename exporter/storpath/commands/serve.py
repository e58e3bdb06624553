"""`storpath serve`: the exporter."""

from __future__ import annotations

import logging
import signal
import sys
import threading

from storpath import __version__, log
from storpath.background import Scheduler
from storpath.cli import roots_from
from storpath.config import DEFAULT_PORT
from storpath.exporter import build_collectors, make_registry
from storpath.server import make_server, serve_in_thread
from storpath.sysfs import raise_open_files_limit

LOG = log.get("serve")


def add_parser(sub, common):
    parser = sub.add_parser("serve", parents=[common], help="Serve metrics over HTTP.",
                            description="Serve storpath's metrics for Prometheus.")
    parser.add_argument("--web.listen-address", dest="listen_address", metavar="ADDR",
                        help=f"Address to listen on (default :{DEFAULT_PORT}).")
    parser.set_defaults(run=run)


def run(args, config) -> int:
    roots = roots_from(config)
    # Each PCI device's directory is held open (see PciReader): up to the hard limit,
    # as node_exporter (Go) raises its own limit at start.
    before, after = raise_open_files_limit()
    if after != before:
        log.kv(LOG, logging.DEBUG, "raised the open files limit", soft=before, to=after)
    scheduler = Scheduler()
    collectors = build_collectors(roots, config, scheduler)
    names = [c.name for c in collectors]
    listen = config["web"]["listen_address"]
    try:
        server = make_server(listen, make_registry(collectors), names)
    except (OSError, ValueError) as exc:
        log.kv(LOG, logging.ERROR, "cannot listen", address=listen, err=str(exc))
        return 1
    server.runbook_base, server.config = config["web"]["runbook_url_base"], config
    stop = threading.Event()

    def on_signal(signum, _frame):
        log.kv(LOG, logging.INFO, "shutting down", signal=signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    scheduler.start()
    serve_in_thread(server)
    log.kv(LOG, logging.INFO, "storpath listening", address=listen, version=__version__,
           collectors=",".join(names), sysfs=roots.sysfs, procfs=roots.procfs)
    stop.wait()
    server.shutdown()
    server.server_close()
    # Collectors first: closing the probes collector kills a running fio, so the
    # background threads it would hold are free to stop at once.
    for collector in collectors:
        close = getattr(collector, "close", None)
        if close:
            close()
    scheduler.stop()
    log.kv(LOG, logging.INFO, "stopped")
    sys.stdout.flush()
    return 0
