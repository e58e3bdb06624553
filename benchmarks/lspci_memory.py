"""Peak memory and time of reading an lspci dump (a benchmark, not a test): `storpath check
--lspci` on a dump of N PCI functions, as large a dump as anyone may hand in.

Writes a dump of N functions (`lspci -vvnn`'s layout: a header line, an Express capability with
LnkCap and LnkSta), every 65,536 functions in a domain of their own, then in a fresh interpreter
reads it with `storpath.readers.lspci.read_dump` and reports the peak resident set
(resource.getrusage's ru_maxrss) and the seconds taken, with the baseline of the same
interpreter that imported the reader and read nothing.

    python -m benchmarks.lspci_memory [--functions 1000000] [--detail] [--exporter DIR]

`--detail`: four lines per function (a dump about 4 times as large), else the header line only.
`--exporter DIR`: the folder holding the `storpath` package to measure (default this checkout's
exporter/): point it at another checkout's to measure before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, resource, sys, time
from storpath.readers.lspci import read_dump
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
if sys.argv[1] != "-":
    record, problems = read_dump(sys.argv[1])
    functions, cut = len(record.dump.devices), record.cut
else:
    functions, cut = 0, False
seconds = time.perf_counter() - start
print(json.dumps({"peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "base_kib": base,
                  "seconds": seconds, "functions": functions, "cut": cut}))
"""


def write_dump(path: str, functions: int, detail: bool) -> int:
    with open(path, "w", encoding="ascii") as out:
        for n in range(functions):
            domain, rest = divmod(n, 65536)
            bus, rest = divmod(rest, 256)
            slot, function = divmod(rest, 8)
            out.write(f"{domain:04x}:{bus:02x}:{slot:02x}.{function} Non-Volatile memory controller [0108]: "
                      f"Vendor [144d:a808]\n")
            if detail:
                out.write("\tCapabilities: [70] Express (v2) Endpoint, MSI 00\n"
                          "\t\tLnkCap:\tPort #0, Speed 8GT/s, Width x4, ASPM L1\n"
                          "\t\tLnkSta:\tSpeed 8GT/s, Width x4\n")
    return os.path.getsize(path)


def measure(exporter: str, path: str) -> dict:
    env = dict(os.environ, PYTHONPATH=exporter)
    done = subprocess.run([sys.executable, "-c", _CHILD, path], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", type=int, default=1_000_000)
    parser.add_argument("--detail", action="store_true")
    parser.add_argument("--exporter", default=os.path.join(ROOT, "exporter"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "lspci-vvnn.txt")
        size = write_dump(path, args.functions, args.detail)
        idle = measure(args.exporter, "-")
        got = measure(args.exporter, path)
    print(f"dump: {args.functions} functions, {size / 1e6:.1f} MB; read {got['functions']} functions"
          f"{' (cut)' if got['cut'] else ''} in {got['seconds']:.1f} s; peak RSS {got['peak_kib'] / 1024:.0f} MiB "
          f"(the interpreter with the reader imported: {idle['peak_kib'] / 1024:.0f} MiB)")


if __name__ == "__main__":
    main()
