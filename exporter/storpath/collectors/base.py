"""What every collector is given and must provide.

A collector turns facts (from readers, through analysis) into metric families; it
never opens files itself. `collect()` runs on the scrape path and must be fast: slow
or privileged work belongs in a background task (`Context.schedule`) whose latest
result `collect()` serves.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Optional

from prometheus_client.core import Metric

from storpath.background import Scheduler
from storpath.facts import ScrapeFacts
from storpath.roots import Roots


@dataclass
class Context:
    roots: Roots
    config: Dict[str, Any] = field(default_factory=dict)  # this collector's section, defaults applied
    scheduler: Scheduler = field(default_factory=Scheduler)
    full_config: Dict[str, Any] = field(default_factory=dict)  # the whole validated config (probes etc.)
    facts: Optional[ScrapeFacts] = None  # shared by all collectors of one exporter; see storpath.facts

    def __post_init__(self) -> None:
        if self.facts is None:
            self.facts = ScrapeFacts(self.roots)


class Collector:
    name = "unnamed"
    # Keys a collector accepts in its `collectors.<name>` config section, with defaults.
    # The type of each default is the type the config loader checks.
    config_defaults: Dict[str, Any] = {}

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.roots = ctx.roots
        self.config = ctx.config
        from storpath import log

        self.log: logging.Logger = log.get(self.name)

    def collect(self) -> Iterable[Metric]:
        raise NotImplementedError
