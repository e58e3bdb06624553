"""Text from the hardware and the kernel, made safe to write out.

Two hazards, each handled here once for every output:

- Names the kernel gives as bytes (sysfs directory entries, link targets, zpool's
  output) need not be UTF-8. Python decodes them as it decodes file names (PEP 383): a
  byte that is not UTF-8 becomes a lone surrogate, U+DC80..U+DCFF, so a path built from
  the name still opens the files under it. Such a str cannot be encoded as UTF-8, so
  every output takes the name through `utf8`, which writes that byte as the four
  characters `\\xff`. The readers keep the raw name; only what is written shows the
  escape.
- Strings the hardware makes up (an NVMe model, a DMI product name) may hold control
  characters: ESC starts terminal sequences that clear the screen, set the window title
  or plant a hyperlink; CR and LF break a report's layout; C1 controls (U+009B is a
  CSI of its own) and bidi overrides (U+202E) reorder what a person reads. `display`
  escapes every character that is not printable, so one value is one line of plain
  text.

Which output takes which:
    utf8     the exposition's label values, `storpath check --json`
    display  `storpath check`, `storpath tree`, the landing page: text for a person
"""

from __future__ import annotations

from typing import Any

# PEP 383: the bytes 0x80..0xff that did not decode are the code points 0xdc80..0xdcff.
_SURROGATE_ESCAPES = range(0xDC80, 0xDD00)


def _escape(char: str) -> str:
    """One character as Python writes it in a string literal: \\xNN, \\uNNNN, \\UNNNNNNNN;
    a byte that did not decode as the byte it was."""
    code = ord(char)
    if code in _SURROGATE_ESCAPES:
        code -= 0xDC00
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def utf8(text: str) -> str:
    """`text` with every lone surrogate escaped (`dev-sdh\\udcff` -> `dev-sdh\\xff`): it
    encodes as UTF-8. Other characters are left as they are."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join(_escape(c) if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def utf8_data(value: Any) -> Any:
    """`value` (dicts, lists and tuples of strings, numbers, None) with `utf8` applied
    to every string in it, keys included: for JSON that any parser reads back."""
    if isinstance(value, str):
        return utf8(value)
    if isinstance(value, dict):
        return {utf8_data(k): utf8_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [utf8_data(v) for v in value]
    return value


def display(text: str) -> str:
    """`text` as one line of visible text: every character Python does not count as
    printable escaped, as in `utf8`. Those are the controls (C0, DEL, C1: ESC, BEL, CR, LF,
    TAB, U+009B), the format characters (bidi overrides and isolates, zero-width ones),
    line and paragraph separators, surrogates, spaces other than U+0020, and code points
    not assigned. Printable text, accents and scripts included, passes unchanged."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


__all__ = ["utf8", "utf8_data", "display"]
