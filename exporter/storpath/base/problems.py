"""What a reader met that the operator should hear of once.

Readers return problems beside their records instead of logging (storpath.scrape.snapshot logs
each one once per exporter run).
"""

from __future__ import annotations

import logging
from typing import Any, Tuple

from storpath.base.records import datarecord


# How loud a problem is, as the snapshot step logs it: readers name a level from here, never
# importing logging themselves (a reader never logs; tests/unit/test_layers.py keeps it so).
DEBUG, INFO, WARNING, ERROR = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR

# Fields of a problem that say where it is. Any other field (value, reason, err, ...) is what
# was found there: left out of the key.
PLACE_FIELDS = frozenset({"source", "address", "attribute", "device", "link", "phy", "path", "zpool", "node",
                          "cpu", "tool", "controllers", "end_devices"})


@datarecord(frozen=True)
class Problem:
    """An attribute that cannot be parsed, a device that cannot be read... `fields` are
    the log line's key=value pairs. The message and the fields that name the place
    (PLACE_FIELDS) identify it; what was read there or why it failed does not, so a
    value that changes on every read is still logged once."""

    message: str
    fields: Tuple[Tuple[str, Any], ...] = ()
    level: int = logging.WARNING

    @property
    def key(self) -> Tuple:
        return (self.message, tuple((name, value) for name, value in self.fields if name in PLACE_FIELDS))

