"""What a reader met that the operator should hear of once.

Readers return problems beside their records instead of logging (storpath.snapshot logs
each one once per exporter run).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Tuple


@dataclass(frozen=True)
class Problem:
    """An attribute that cannot be parsed, a device that cannot be read... `fields` are
    the log line's key=value pairs; message and fields together identify it."""

    message: str
    fields: Tuple[Tuple[str, Any], ...] = ()
    level: int = logging.WARNING

    @property
    def key(self) -> Tuple:
        return (self.message, self.fields)
