"""The collector registry.

Each module in this package defines one collector class and registers it with
`@register(name, default=...)`. That alone creates its `--collector.<name>` and
`--no-collector.<name>` flags and its `collectors.<name>` config section: adding a
collector never touches the CLI or the server.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Dict, Type

from storpath.base.records import datarecord
from storpath.collectors.base import Collector, Context  # noqa: F401  (re-exported)


@datarecord(frozen=True)
class CollectorSpec:
    """One registered collector: its name, class, whether it is on by default, its help line."""

    name: str
    cls: Type[Collector]
    default_enabled: bool
    help: str


REGISTRY: Dict[str, CollectorSpec] = {}


def register(name: str, default: bool = True) -> Callable[[Type[Collector]], Type[Collector]]:
    def wrap(cls: Type[Collector]) -> Type[Collector]:
        if name in REGISTRY and REGISTRY[name].cls is not cls:
            raise RuntimeError(f"collector {name!r} registered twice")
        cls.name = name
        doc = (cls.__doc__ or "").strip().splitlines()
        REGISTRY[name] = CollectorSpec(name=name, cls=cls, default_enabled=default, help=doc[0] if doc else name)
        return cls

    return wrap


def load_all() -> Dict[str, CollectorSpec]:
    """Import every collector module so that each registers itself."""
    for module in pkgutil.iter_modules(__path__):
        if module.name != "base" and not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    return dict(sorted(REGISTRY.items()))
