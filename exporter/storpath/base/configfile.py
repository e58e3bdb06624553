"""Every YAML file storpath reads (--config.file, --web.config.file), through one bounded
loader. Its own module so that PyYAML is imported only where a file is read: `storpath
serve` without --config.file never imports it."""

from __future__ import annotations

import os
import stat
from typing import Any, Dict

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

try:
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built without libyaml
    CParser = None

from storpath.base.config import ConfigError
from storpath.base.log import describe

# Every YAML file storpath reads (--config.file, --web.config.file) goes through one loader,
# bounded so that no file can make the exporter spend minutes or gigabytes:
# - at most MAX_FILE_BYTES (a storpath config is a few KiB; a thousand probe targets ~100 KiB);
# - no anchors or aliases (&name, *name): a config has no use for them, and nested aliases
#   expand into billions of values (the "billion laughs") in anything that walks the result;
# - at most MAX_DEPTH levels of nesting;
# - a key given twice in one mapping is refused (plain PyYAML silently keeps the last one).
# Measured on a shared 2-core machine, 1 MB of YAML: libyaml's scanner and parser take 0.2 s where PyYAML's own take
# 1.2 s (a flow list of 500k numbers: 1.8 s against 8.5 s), so libyaml is used where present.
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 64


class _Refused(Exception):
    pass


class _BoundedComposer(Composer):
    """PyYAML's composer, refusing anchors, aliases and deep nesting."""

    def __init__(self):
        Composer.__init__(self)
        self._depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused(f"line {event.start_mark.line + 1}: YAML anchors and aliases (&name, *name) are not "
                           f"accepted in a storpath config: write the value out")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"line {event.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _UniqueKeyConstructor(SafeConstructor):
    """YAML's safe constructor (plain data, no Python objects), refusing a key given twice."""

    def construct_mapping(self, node, deep=False):
        seen: Dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:
                continue  # an unhashable key: the base class reports it
            if first != key_node.start_mark.line + 1:
                raise _Refused(f"the key {describe(key)} is given twice (lines {first} and "
                               f"{key_node.start_mark.line + 1})")
        return super().construct_mapping(node, deep)


class PythonLoader(Reader, Scanner, Parser, _BoundedComposer, _UniqueKeyConstructor, Resolver):
    """PyYAML's own scanner and parser: where PyYAML was built without libyaml."""

    def __init__(self, stream):
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BoundedComposer.__init__(self)
        _UniqueKeyConstructor.__init__(self)
        Resolver.__init__(self)


if CParser is not None:
    class LibyamlLoader(_BoundedComposer, CParser, _UniqueKeyConstructor, Resolver):
        """libyaml's events, composed by _BoundedComposer (which comes first, so that its
        checks replace libyaml's own composer)."""

        def __init__(self, stream):
            CParser.__init__(self, stream)
            _BoundedComposer.__init__(self)
            _UniqueKeyConstructor.__init__(self)
            Resolver.__init__(self)

    LOADER: type = LibyamlLoader
else:
    LOADER = PythonLoader


def parse_text(text: str, name: str = "<config>") -> Any:
    """The YAML document of a config file; ConfigError naming `name` when it is not one,
    or breaks a bound above."""
    loader = LOADER(text)
    try:
        return loader.get_single_data()
    except _Refused as exc:
        raise ConfigError(f"config file {name}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {name} is not valid YAML: {_cut(str(exc))}") from None
    except (ValueError, OverflowError) as exc:  # an integer of 5000 digits, a date in year 0
        raise ConfigError(f"config file {name}: a value cannot be read: {_cut(str(exc).split(';')[0])}") from None
    finally:
        loader.dispose()


def _cut(text: str, limit: int = 300) -> str:
    """A parser's message, which quotes the file's own text, at most `limit` characters."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def load_file(path: str) -> Dict[str, Any]:
    """A YAML file's document, within the loader's bounds; ConfigError saying why not."""
    try:
        # O_NONBLOCK: a FIFO at the path must not hold the loop that also answers SIGTERM.
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ConfigError(f"config file {path} is not a regular file")
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"config file {path} is larger than {MAX_FILE_BYTES >> 20} MiB, the most storpath "
                          f"reads (a storpath config is a few KiB)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text: byte {exc.start} is {raw[exc.start]:#04x}") from None
    data = parse_text(text, path)
    return data or {}
