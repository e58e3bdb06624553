"""A fixture machine as `storpath serve` scrapes it and `storpath check` reads it, in this
process: the command line parsed as the commands parse it, serve's collectors, scheduler and
single flight (storpath.commands.serve.Built) and every format of each answer; check's
report, JSON and tree from cli.main. `observe` does both under the recorder, taking what
storpath holds between scrapes."""

from __future__ import annotations

import contextlib
import io
import logging
from dataclasses import dataclass
from typing import List

from storpath import cli
from storpath.commands import serve
from storpath.commands.options import resolve_config
from tests.architecture.recorder import Event, recording
from tests.architecture.rules import StateWatch, Taken

FORMATS = [(openmetrics, gzip) for openmetrics in (False, True) for gzip in (False, True)]


def paths(root: str) -> List[str]:
    return [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured"]


class Served:
    """`storpath serve` on the tree at `root`: its background tasks run once as it is made (as a
    started scheduler runs them first), then each `scrape()` is one flight, as a request asks."""

    def __init__(self, root: str, *extra: str):
        args = cli.build_parser("serve").parse_args(["serve", *paths(root), *extra])
        self.built = serve.Built(resolve_config(args))
        self.built.scheduler.run_all_once()

    def scrape(self) -> bytes:
        flight = self.built.scraper.scrape(60.0)
        assert flight is not None and flight.error is None, flight and flight.error
        bodies = {form: b"".join(flight.chunks(*form)) for form in FORMATS}
        return bodies[False, False]

    def close(self) -> None:
        self.built.close(wait=5.0)

    def __enter__(self) -> "Served":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def _storpath_logging():
    """cli.main sets up the storpath logger for the command; put it back as it was."""
    logger = logging.getLogger("storpath")
    handlers, level, propagate = logger.handlers[:], logger.level, logger.propagate
    try:
        yield
    finally:
        logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate


def check(root: str) -> None:
    """`storpath check` on the tree at `root`: the report, --json and --tree."""
    for extra in ([], ["--json"], ["--tree", "--color=never"]):
        with _storpath_logging(), contextlib.redirect_stdout(io.StringIO()):
            status = cli.main(["check", *paths(root), *extra])
        assert status in (0, 1, 2), f"storpath check {' '.join(extra)} could not read {root}: exit {status}"


@dataclass
class Observed:
    events: List[Event]  # everything recorded while serving and checking
    taken: List[Taken]  # what the modules and objects held before the first scrape and after each


def observe(root: str, scrapes: int = 3) -> Observed:
    """Serve the tree at `root` for `scrapes` scrapes, then check it, all recorded; what
    storpath holds is taken before the first scrape and after each."""
    with recording() as events:
        with Served(root, "--log.level=error") as served:
            watch = StateWatch(served.built)
            taken = [watch.take()]
            for _ in range(scrapes):
                served.scrape()
                taken.append(watch.take())
        check(root)
    return Observed(events, taken)
