"""`storpath serve`: the exporter.

SIGTERM and SIGINT stop it (a running fio probe is killed, its budget saved). SIGHUP reloads
--config.file and --web.config.file: both are read and checked first, and a bad file keeps
the running configuration (the log says why). The signal handlers only record the signal
(storpath.http.process.Signals); the main loop stops or reloads, and every SIGHUP that came
during one reload is the next single reload. Requests keep being served during a reload:
the new collectors and web settings take over from the next request, and the old
collectors are closed once no scrape uses them any more.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import time
from typing import Dict, Iterable, Optional

from storpath import __version__
from storpath.base import log, privhelper
from storpath.base.background import Scheduler
from storpath.commands.options import resolve_config, roots_from, say_no_devices
from storpath.base.config import DEFAULT_PORT, ConfigError
from storpath.report.exporter import StorpathExporter, build_collectors
from storpath.scrape.exposition import FamilyTexts, SeriesFamily
from storpath.http import webconfig
from storpath.http.process import RELOAD, STOP, Signals, one_malloc_heap, raise_open_files_limit
from storpath.http.scrape import Scraper
from storpath.http.runtime import Runtime
from storpath.http.server import Server, Site
from storpath.report.reloads import FAMILIES as RELOAD_FAMILIES
from storpath.report.reloads import ReloadStatus
from storpath.scrape.slow import SlowRunner

LOG = log.get("serve")

# Allocations (less deallocations) of container objects between two young collections of the
# cyclic garbage collector once serving settled (Built.settle); CPython's default is 700.
YOUNG_COLLECTION = 20_000


def add_parser(sub, common):
    parser = sub.add_parser("serve", parents=[common], help="Serve metrics over HTTP.",
                            description="Serve storpath's metrics for Prometheus.")
    helper = parser.add_argument_group("helper")
    helper.add_argument("--helper.socket", dest="helper_socket", metavar="PATH",
                        help="Ask `storpath helper` at this Unix socket for the reads that need a capability "
                             "(RAID tools, dmsetup, NVMe Identify and SMART log, smartctl, sg_modes, PCI config "
                             "space): this process then needs none (config helper.socket). Default: run them here.")
    web = parser.add_argument_group("web")
    web.add_argument("--web.listen-address", dest="web_listen_address", metavar="ADDR", action="append",
                     help=f"Address to listen on (default :{DEFAULT_PORT}); repeat it to listen on several, each "
                          f"one given is listened on.")
    web.add_argument("--web.config.file", dest="web_config_file", metavar="FILE",
                     help="TLS and basic auth configuration in the exporter-toolkit format (as node_exporter's "
                          "--web.config.file); reloaded on SIGHUP.")
    web.add_argument("--web.telemetry-path", dest="web_telemetry_path", metavar="PATH",
                     help="Path under which to expose metrics (default /metrics).")
    web.add_argument("--web.max-requests", dest="web_max_requests", metavar="N", type=int,
                     help="Maximum number of concurrent scrape requests (at most 1024); more get 503. 0 means "
                          "no limit (default 40).")
    web.add_argument("--web.disable-exporter-metrics", dest="web_disable_exporter_metrics", action="store_const",
                     const=True, help="Leave out the exporter's own process_* and python_* metrics.")
    web.add_argument("--web.scrape-timeout", dest="web_scrape_timeout", metavar="DURATION",
                     help="The server's deadline for one scrape, shared by every request that arrives while it "
                          "runs; a client's X-Prometheus-Scrape-Timeout-Seconds bounds only its own wait "
                          "(default 10s).")
    web.add_argument("--web.read-blocked-after", dest="web_read_blocked_after", metavar="DURATION",
                     help="A source is reported blocked (a device that stopped answering) when one of its reads "
                          "has been outstanding this long; slow reads are not (default 5s).")
    parser.set_defaults(run=run)


class Built:
    """The collectors of one configuration, with their scheduler and the scraper in front."""

    def __init__(self, config: Dict, reloads: Optional[ReloadStatus] = None):
        self.config = config
        self.reloads = reloads or ReloadStatus()
        self._reload_texts = FamilyTexts(RELOAD_FAMILIES)  # one scrape at a time: this Built's scraper's
        self.roots = roots_from(config)
        say_no_devices(self.roots)
        self.scheduler = Scheduler()
        self.slow = SlowRunner(self.roots, self.scheduler, config)
        self.collectors = build_collectors(self.roots, config, self.scheduler, self.slow)
        self.names = [c.name for c in self.collectors]
        self.exporter = StorpathExporter(self.collectors, self.roots, blocked_after=config["web"]["read_blocked_after"])
        self.runtime = None if config["web"]["disable_exporter_metrics"] else Runtime()
        # A scrape: the exporter's families straight from it, then this configuration's own.
        self.scraper = Scraper(self.exporter.collect, deadline=config["web"]["scrape_timeout"], more=self.own_families)
        self._complete = False  # a scrape in which every collector succeeded has been served
        self._settled = False  # gc.freeze() done after it

    def own_families(self) -> Iterable[SeriesFamily]:
        """What follows the exporter's families in a scrape (the scraper asks for them after
        them, in the same flight): the reloads' and the exporter process's own; and, the
        scrape's collectors having all succeeded, that a complete scrape has been made."""
        yield from self._reload_texts.families(self.reloads.rows())
        if self.runtime is not None:
            yield from self.runtime.families()
        if not self._complete and self.exporter.complete():
            self._complete = True

    def settle(self) -> None:
        """Once, after this configuration's first complete scrape (every collector succeeded):
        what lives from then on (modules, device records, family texts) is left out of the
        cyclic collector's passes: 11-19 -> 5-7 ms of collection per scrape of 2048 PCI
        functions, 150 -> 54-66 ms at 8192, and none of it became cyclic garbage over the
        scrapes after (python -m benchmarks.gc_scrape; docs/performance.md). The collection
        first (once: 47 ms at 2048, 118 ms at 8192), so that no garbage is frozen with the
        rest; the main loop calls this, so that it delays no answer. A reload unfreezes.

        From then on a young collection waits for YOUNG_COLLECTION allocations instead of
        CPython's 700: a scrape's records, rows and texts live until its answer is made, so at
        700 the collector walked them young, then again in the middle generation, dozens of
        times a scrape for nothing (almost nothing the scrape makes is cyclic; what is, is
        freed at the next young collection all the same). 171 -> 159 ms of CPU a scrape, measured
        alternated at 2048 PCI functions (docs/performance.md, "Serving without prometheus_client")."""
        if self._complete and not self._settled:
            self._settled = True
            gc.unfreeze()  # what the command line froze while it loaded (storpath.cli.main) is collected too
            gc.collect()
            gc.freeze()
            gc.set_threshold(YOUNG_COLLECTION, *gc.get_threshold()[1:])

    def start(self) -> None:
        self.scheduler.start()

    def close(self, wait: float = 30.0) -> None:
        # Not while a scrape still reads through these collectors.
        end = time.monotonic() + wait
        while self.scraper.busy() and time.monotonic() < end:
            time.sleep(0.05)
        # The work first: closing the slow sources' runner kills a running fio and the RAID
        # tools, so the background threads they would hold are free to stop at once.
        self.slow.close()
        self.exporter.close()
        self.scheduler.stop()


def _site(built: Built, web: webconfig.WebConfig) -> Site:
    section = built.config["web"]
    return Site(scraper=built.scraper, collector_names=built.names, web=web, telemetry_path=section["telemetry_path"],
                max_requests=section["max_requests"], timeout=section["scrape_timeout"], exporter=built.exporter,
                runbook_base=section["runbook_url_base"], config=built.config)


def _collecting_part(config: Dict) -> Dict:
    """What a reload must rebuild the collectors for: all but the web and log sections, and the
    web settings the scrape is built with."""
    part = {k: v for k, v in config.items() if k not in ("web", "log")}
    for key in ("disable_exporter_metrics", "scrape_timeout", "read_blocked_after"):
        part[key] = config["web"][key]
    return part


class Service:
    def __init__(self, args, config: Dict, web: webconfig.WebConfig, built: Built, server: Server):
        self.args = args
        self.config = config
        self.web = web
        self.built = built
        self.server = server
        self.reloads = built.reloads if built is not None else ReloadStatus()

    def reload(self) -> bool:
        """Re-read both config files; keep the running ones if either is bad. Whatever goes
        wrong is logged and the running configuration kept: the main loop that calls this
        is what answers SIGTERM and the next SIGHUP, so no exception may end it."""
        try:
            self._reload()
            self.reloads.record(True, tls=self.web.tls, basic_auth=bool(self.web.users))
            return True
        except (ConfigError, webconfig.WebConfigError) as exc:
            err = str(exc)
        except Exception as exc:  # a collector that cannot start, or what no check foresaw
            err = f"{type(exc).__name__}: {str(exc)[:500]}"
        log.kv(LOG, logging.ERROR, "reload failed, keeping the running configuration", err=err)
        self.reloads.record(False)
        return False

    def _reload(self) -> None:
        config = resolve_config(self.args)
        web = webconfig.load(config["web"]["config_file"])
        if web.tls != self.server.tls:
            raise ConfigError("turning TLS on or off needs a restart")
        if config["web"]["listen_address"] != self.config["web"]["listen_address"]:
            log.kv(LOG, logging.WARNING, "a new listen address needs a restart; still listening on the old one",
                   address=",".join(self.config["web"]["listen_address"]))
            config["web"]["listen_address"] = self.config["web"]["listen_address"]
        log.setup(config["log"]["level"], fmt=config["log"]["format"])
        old = None
        if _collecting_part(config) != _collecting_part(self.config):
            privhelper.use(config["helper"]["socket"])  # the new collectors' tasks ask the new helper
            try:
                built = Built(config, self.reloads)  # a collector that cannot start raises: the running ones stay
                built.start()
            except BaseException:
                privhelper.use(self.config["helper"]["socket"])
                raise
            old, self.built = self.built, built
        self.server.swap(_site(self.built, web))
        self.config, self.web = config, web
        if old is not None:
            gc.unfreeze()  # the old collectors' objects go; the new ones freeze after their first complete scrape
            old.close()
        log.kv(LOG, logging.INFO, "configuration reloaded", collectors=",".join(self.built.names),
               tls=web.tls, basic_auth=bool(web.users), collectors_rebuilt=old is not None)


def run(args, config) -> int:
    one_malloc_heap()
    raise_open_files_limit()
    privhelper.use(config["helper"]["socket"])
    try:
        web = webconfig.load(config["web"]["config_file"])
    except webconfig.WebConfigError as exc:
        log.kv(LOG, logging.ERROR, "invalid web configuration", err=str(exc))
        print(f"storpath: {exc}", file=sys.stderr)
        return 2
    built = Built(config)
    listen = config["web"]["listen_address"]
    try:
        server = Server(listen, _site(built, web))
    except (OSError, ValueError) as exc:
        log.kv(LOG, logging.ERROR, "cannot listen", address=",".join(listen), err=str(exc))
        built.close(wait=0)
        return 1
    service = Service(args, config, web, built, server)
    # Until here a signal has its default action: a start-up that hangs still ends on SIGTERM.
    signals = Signals()
    built.start()
    server.start()
    built.reloads.record(True, tls=web.tls, basic_auth=bool(web.users))
    log.kv(LOG, logging.INFO, "storpath listening", address=",".join(listen), version=__version__,
           collectors=",".join(built.names), sysfs=built.roots.sysfs, procfs=built.roots.procfs,
           tls=web.tls, basic_auth=bool(web.users), telemetry_path=config["web"]["telemetry_path"])
    while True:
        # With a timeout: a signal whose byte did not fit in the pipe is found by the next wait.
        received = signals.wait(1.0)
        stop = [s for s in STOP if s in received]
        if stop:
            log.kv(LOG, logging.INFO, "shutting down", signal=signal.Signals(stop[0]).name)
            break
        service.built.settle()  # (not on the way out: its one full collection would only delay the stop)
        if RELOAD in received:
            # Every SIGHUP that came since the last reload is this one reload.
            log.kv(LOG, logging.INFO, "reloading", signal="SIGHUP")
            service.reload()
    server.stop()
    service.built.close(wait=0)
    log.kv(LOG, logging.INFO, "stopped")
    sys.stdout.flush()
    return 0
