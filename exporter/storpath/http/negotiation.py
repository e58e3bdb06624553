"""Content negotiation for /metrics: which format (Accept) and whether gzip (Accept-Encoding).

Prometheus 2.42 asks `application/openmetrics-text;version=1.0.0,application/openmetrics-text;
version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1`: OpenMetrics wins there. A
client that names neither gets the text format 0.0.4, as from node_exporter. `q=0` means
"not this" (RFC 9110 12.4.2), also for `gzip;q=0`.
"""

from __future__ import annotations

from typing import List, Optional, Tuple


def _entries(header: Optional[str]) -> List[Tuple[str, dict, float]]:
    """(media or coding, its parameters without q, q) per comma-separated entry."""
    out = []
    for part in (header or "").split(","):
        fields = [f.strip() for f in part.split(";")]
        name = fields[0].lower()
        if not name:
            continue
        params, q = {}, 1.0
        for field in fields[1:]:
            key, _, value = field.partition("=")
            key, value = key.strip().lower(), value.strip().strip('"')
            if key == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0
            elif key:
                params[key] = value
        out.append((name, params, q))
    return out


def wants_openmetrics(accept: Optional[str]) -> bool:
    """True when OpenMetrics is acceptable and preferred at least as much as the text format."""
    om = text = 0.0
    text_named = False
    for media, params, q in _entries(accept):
        if media == "application/openmetrics-text" and params.get("version", "1.0.0") in ("1.0.0", "0.0.1"):
            om = max(om, q)
        elif media == "text/plain":
            text, text_named = max(text, q), True
        elif media in ("*/*", "text/*") and not text_named:
            text = max(text, q)
    return om > 0 and om >= text


def wants_gzip(accept_encoding: Optional[str]) -> bool:
    gzip_q: Optional[float] = None
    star_q: Optional[float] = None
    for coding, _, q in _entries(accept_encoding):
        if coding in ("gzip", "x-gzip"):
            gzip_q = q if gzip_q is None else max(gzip_q, q)
        elif coding == "*":
            star_q = q
    if gzip_q is not None:
        return gzip_q > 0
    return bool(star_q)
