"""Serve a simulated fleet: N hosts, each answering what a real `storpath serve` answered on one
of the source machines, with an identity of its own (a benchmark helper, not a test).

Sources are expositions scraped once from the real exporter (benchmarks/fleet.py does that on
every fixture machine variant and lab capture). Host i serves source i mod len(sources), with
every identity a real fleet has per host made distinct: NVMe `serial` gets the host's number
appended, SAS addresses (`sas_address`, `attached_sas_address`) are XORed with it. PCI addresses,
device names, models and firmware stay: servers of one build have the same layout and parts, which
is what the fleet outlier rules group on. Prometheus tells hosts apart by `instance` (the host's
name, see benchmarks/fleet.py's relabelling).

    GET /hosts/<name>/metrics    the exposition of host <name> (host-00000 ... host-NNNNN),
                                 gzip when asked for (Prometheus always asks)

    python -m benchmarks.fleet_targets --sources DIR --hosts 2000 --port 9900
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_SERIAL = re.compile(r'(\bserial=")([^"]*)(")')
_SAS = re.compile(r'(\b(?:attached_)?sas_address=")0x([0-9a-fA-F]+)(")')


def host_name(i: int) -> str:
    return f"host-{i:05d}"


def for_host(exposition: str, i: int) -> str:
    """``exposition`` as host ``i`` serves it: its own serials and SAS addresses."""
    text = _SERIAL.sub(lambda m: f"{m.group(1)}{m.group(2)}-{i:05d}{m.group(3)}", exposition)
    return _SAS.sub(lambda m: f"{m.group(1)}0x{(int(m.group(2), 16) ^ (i << 16)) & (2**64 - 1):016x}{m.group(3)}",
                    text)


def load_sources(folder: str) -> List[str]:
    names = sorted(n for n in os.listdir(folder) if n.endswith(".prom"))
    if not names:
        raise SystemExit(f"no *.prom expositions in {folder}")
    out = []
    for name in names:
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            out.append(handle.read())
    return out


def build(sources: List[str], hosts: int) -> Dict[str, bytes]:
    """{host name: gzip body}, compressed once: the benchmark measures Prometheus, not this server."""
    return {host_name(i): gzip.compress(for_host(sources[i % len(sources)], i).encode(), 1) for i in range(hosts)}


def serve(bodies: Dict[str, bytes], port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802 (http.server's naming)
            parts = self.path.split("/")
            body = bodies.get(parts[2]) if len(parts) == 4 and parts[1] == "hosts" and parts[3] == "metrics" else None
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            if "gzip" in self.headers.get("Accept-Encoding", ""):
                self.send_header("Content-Encoding", "gzip")
            else:
                body = gzip.decompress(body)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"serving {len(bodies)} hosts on 127.0.0.1:{port}", flush=True)
    server.serve_forever()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", required=True, help="folder of *.prom expositions")
    parser.add_argument("--hosts", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    serve(build(load_sources(args.sources), args.hosts), args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
