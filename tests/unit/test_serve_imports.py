"""What `storpath serve` imports: only what serving needs. The other subcommands, the
landing page's modules (tree, findings), prometheus_client (storpath.http.runtime makes its
process and Python families), PyYAML without a config file, bcrypt and hashlib without
basic auth, fio's machinery without probe targets, tarfile without --example (the example
machines' archives), secrets (atomicfile names its temporary files from os.urandom), the
lspci dump parser (`check --lspci` only), html (the runbooks' index page) and the RAID
tools' parsers without their outputs stay out of a scrape-only exporter's start
(benchmarks/startup.py measures what that start costs), and the cyclic garbage collector does not run while the command loads."""

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

# Run in a fresh interpreter: the command line as `storpath serve` parses it, the collectors
# built from the config, one scrape of a fixture machine and the HTTP side's modules.
PROGRAM = """
import json, sys
from storpath import cli
from storpath.commands.options import resolve_config
args = cli.build_parser("serve").parse_args(["serve", "--path.sysfs", sys.argv[1] + "/sys",
                                             "--path.procfs", sys.argv[1] + "/proc", "--log.level=error"])
from storpath.commands import serve
import gc, weakref
class Cycle:
    pass
cycle = Cycle()
cycle.itself = cycle
loaded = weakref.ref(cycle)  # garbage from loading, frozen with the rest as storpath.cli.main freezes it
del cycle
gc.freeze()
frozen_by_loading = gc.get_freeze_count()
built = serve.Built(resolve_config(args))
built.start()
built.settle()  # before any complete scrape: nothing
before, young = gc.get_freeze_count() - frozen_by_loading, gc.get_threshold()[0]
rows = built.scraper.scrape(10.0).families  # the scrape the server's requests get
built.settle()  # what serve's main loop does after it
built.close(wait=0)
print(json.dumps({"modules": sorted(sys.modules), "families": len(rows), "frozen": [before, gc.get_freeze_count()],
                  "young": [young, gc.get_threshold()[0]], "loading_garbage_freed": loaded() is None}))
"""

NOT_SERVED = ("prometheus_client", "importlib.metadata", "ssl", "_ssl", "yaml", "bcrypt", "hashlib", "html", "storpath.base.configfile", "storpath.report.tree", "storpath.report.findings", "storpath.http.landing",
              "storpath.report.capture", "storpath.manpage", "storpath.report.metricsdoc", "storpath.commands.check",
              "storpath.commands.tree", "storpath.commands.capture", "storpath.commands.probe",
              "storpath.scrape.probes.engine", "storpath.scrape.probes.fio", "tarfile", "secrets",
              "storpath.readers.lspci", "storpath.readers.raid.storcli", "storpath.readers.raid.megacli",
              "storpath.readers.raid.ssacli", "storpath.readers.raid.arcconf", "storpath.readers.raid.smartctl")


def serve_imports(machine_tree, exporter=os.path.join(ROOT, "exporter")):
    root = machine_tree("desktop-z690-single-socket", "healthy")
    env = dict(os.environ, PYTHONPATH=exporter)
    done = subprocess.run([sys.executable, "-c", PROGRAM, root], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_serve_imports_only_what_serving_needs(machine_tree):
    found = serve_imports(machine_tree)
    assert found["families"] > 0  # it did scrape
    assert "storpath.commands.serve" in found["modules"] and "cheroot.wsgi" in found["modules"]
    loaded = [m for m in found["modules"] if any(m == n or m.startswith(n + ".") for n in NOT_SERVED)]
    assert loaded == []


def test_serve_freezes_what_lives_after_its_first_complete_scrape(machine_tree):
    """gc.freeze() once a scrape in which every collector succeeded has been served (serve's
    main loop calls Built.settle): the cyclic collector then leaves alone the modules, records
    and texts the exporter keeps (benchmarks/gc_scrape.py), and its young collections wait for
    serve.YOUNG_COLLECTION allocations instead of 700."""
    from storpath.commands.serve import YOUNG_COLLECTION

    found = serve_imports(machine_tree)
    before, after = found["frozen"]
    assert before <= 0 and after > 10_000  # (frozen objects freed by their count leave it)
    assert found["young"] == [700, YOUNG_COLLECTION]
    assert found["loading_garbage_freed"]  # what was frozen while the command loaded is collected first


# `storpath serve --help` as the command line runs it: the command's modules loaded, the
# parser built; how many collections the cyclic garbage collector made meanwhile (the first
# allocation after it resumes may start one), and whether it runs again after.
LOADING = """
import gc, json
from storpath.cli import main
runs = []
gc.callbacks.append(lambda phase, info: runs.append(info["generation"]) if phase == "start" else None)
try:
    main(["serve", "--help"])
except SystemExit:
    pass
frozen, young = gc.get_freeze_count(), gc.get_count()[0]
print(json.dumps({"collections": len(runs), "enabled": gc.isenabled(), "frozen": frozen, "young": young}))
"""


def test_the_garbage_collector_waits_while_the_command_loads():
    """Loading serve makes some 40,000 objects that all live: the collector would walk them
    again and again for nothing (benchmarks/startup.py). It is paused while the command line
    is built, and runs again after, with what loading made frozen: left young by the pause,
    all of it would otherwise be walked by the first young collection after."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "exporter"))
    done = subprocess.run([sys.executable, "-c", LOADING], env=env, capture_output=True, text=True, timeout=120,
                          check=True)
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["collections"] == 0 and found["enabled"], found  # before: 30 collections, then 1
    assert found["frozen"] > 10_000 and found["young"] < 700, found


CHEROOT = """
import json, sys
import storpath.http.cheroot_patches
import cheroot
spared = "importlib.metadata" not in sys.modules
import importlib.metadata
print(json.dumps([spared, cheroot.__version__, importlib.metadata.version("cheroot"),
                  type(importlib.metadata.distribution("cheroot")).__name__]))
"""


def test_cheroot_is_imported_without_importlib_metadata_which_stays_whole():
    """cheroot's package asks importlib.metadata for its version only for a Server header
    storpath replaces: it is imported with a stand-in (storpath.http.cheroot_patches), which is
    then taken away, so that whoever imports importlib.metadata later gets the real one."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "exporter"))
    done = subprocess.run([sys.executable, "-c", CHEROOT], env=env, capture_output=True, text=True, timeout=60,
                          check=True)
    spared, told, real, distribution = json.loads(done.stdout)
    assert spared and told == "unknown" and real[:1].isdigit() and distribution == "PathDistribution"
