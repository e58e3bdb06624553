"""Plain structured logging to stderr: logfmt (ts=... level=... logger=... msg="..." key=value),
or one JSON object a line with the same keys (--log.format=json), as node_exporter offers.

Readers report a bad value once per place through `once()`, so a broken attribute read
on every scrape does not flood the log. A key names the place (the check, the device, the
attribute), never the value read there: a value that changes on every scrape would make
a new key, a new line and more memory each time.
"""

from __future__ import annotations

import json
import logging
import reprlib
import sys
import threading
import time

from storpath.base import safetext

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}
_LEVEL_NAMES = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn", logging.ERROR: "error",
                logging.CRITICAL: "error"}


def _quote(value: object) -> str:
    # A value may come from the hardware (a model string, a sysfs name that is not UTF-8):
    # shown escaped (storpath.base.safetext.display), so a log line is one line that cannot
    # drive the terminal it is read on.
    text = str(value)
    if text and text.isprintable() and not any(c in text for c in ' "='):
        return text
    return '"' + safetext.display(text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")) + '"'


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + ".%03dZ" % record.msecs
        parts = [
            f"ts={ts}",
            f"level={_LEVEL_NAMES.get(record.levelno, 'info')}",
            f"logger={_quote(record.name)}",
            f"msg={_quote(record.getMessage())}",
        ]
        for key, value in getattr(record, "fields", {}).items():
            parts.append(f"{key}={_quote(value)}")
        if record.exc_info:
            parts.append(f"err={_quote(self.formatException(record.exc_info))}")
        return " ".join(parts)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + ".%03dZ" % record.msecs
        data = {"ts": ts, "level": _LEVEL_NAMES.get(record.levelno, "info"), "logger": record.name,
                "msg": safetext.utf8(record.getMessage())}
        for key, value in getattr(record, "fields", {}).items():
            data.setdefault(key, value if isinstance(value, (int, float, bool)) or value is None
                            else safetext.utf8(str(value)))
        if record.exc_info:
            data["err"] = self.formatException(record.exc_info)
        # ASCII only: the C1 controls and bidi overrides a hardware string may hold are escaped too.
        return json.dumps(data)


FORMATS = {"logfmt": LogfmtFormatter, "json": JsonFormatter}


def setup(level: str = "info", stream=None, fmt: str = "logfmt") -> None:
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r}, expected one of {', '.join(LEVELS)}")
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}, expected one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(FORMATS[fmt]())
    root = logging.getLogger("storpath")
    root.handlers[:] = [handler]
    root.setLevel(LEVELS[level])
    root.propagate = False


def get(name: str) -> logging.Logger:
    return logging.getLogger(f"storpath.{name}" if not name.startswith("storpath") else name)


def kv(logger: logging.Logger, level: int, msg: str, **fields: object) -> None:
    logger.log(level, msg, extra={"fields": fields})


# Places `once` remembers. Keys name places, so a host has a few hundred at most; past this
# bound `once` stops remembering (and so stops logging) new ones, and says so once.
MAX_ONCE_KEYS = 4096
_seen: set = set()
_seen_lock = threading.Lock()


def once(logger: logging.Logger, level: int, key: tuple, msg: str, **fields: object) -> None:
    """Log `msg` the first time `key` (the place, not the value found there) is seen in
    this process, then stay quiet about it."""
    with _seen_lock:
        if key in _seen:
            return
        full = len(_seen) >= MAX_ONCE_KEYS
        if full:
            if ("once-full",) in _seen:
                return
            key, logger, level = ("once-full",), get("log"), logging.WARNING
            msg, fields = (f"more than {MAX_ONCE_KEYS} distinct one-time messages: further ones are dropped "
                           f"until restart"), {"dropped_msg": msg}
        _seen.add(key)
    kv(logger, level, msg, **fields)


def forget_once_keys() -> None:
    """For tests: make `once` speak again."""
    with _seen_lock:
        _seen.clear()


# A value in a message or log line is shown at most this long: a hostile or huge config value
# (a megabyte string, a deep list) never becomes a huge message.
DESCRIBE_LIMIT = 80
_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = DESCRIBE_LIMIT
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = 4


def describe(value: object) -> str:
    """`value` as Python's repr spells it (strings quoted, control characters escaped),
    with containers shortened to a few items and the whole cut to DESCRIBE_LIMIT characters."""
    try:
        text = _REPR.repr(value)
    except Exception:  # e.g. an int beyond Python's digit limit for str()
        text = f"<{type(value).__name__} that cannot be shown>"
    if len(text) > DESCRIBE_LIMIT:
        text = text[:DESCRIBE_LIMIT - 3] + "..."
    return text
