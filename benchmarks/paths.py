"""What every path to the data costs (a benchmark, not a test): series per path and scrape
time on a synthetic multipath host.

The host: 64 dm-multipath maps of 4 paths each (256 SCSI disks on 4 HBAs, two per NUMA
node, with a captured `dmsetup status`) and 32 NVMe over Fabrics subsystems of 4 TCP
controllers each (one namespace, ANA reported), built with the fixture builders
(tests/fixtures/builders_paths.py). The real `storpath serve` runs on it twice, with and
without the `multipath` and `nvme_subsystem` collectors, each scraped over HTTP in turn (so
both see the same machine load); the difference is what the paths cost.

    python -m benchmarks.paths [--maps 64] [--paths 4] [--subsystems 32] [--controllers 4] [--scrapes 40]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.scrape import _ms, _scrapes  # noqa: E402
from tests.conftest import run_exporter  # noqa: E402
from tests.processes import cpu_seconds  # noqa: E402
from tests.fixtures.builders_paths import devno, dm_map, dmsetup_status, fabric_subsystem, set_wwid, status_line  # noqa: E402
from tests.fixtures.sysfs_builder import MachineBuilder, Namespace  # noqa: E402

PATH_FAMILIES = re.compile(r"^storpath_(multipath_|scsi_drive_|nvme_subsystem_|nvme_path_|nvme_namespace_optimized)")
OFF = ["--no-collector.multipath", "--no-collector.nvme_subsystem"]


def disk_name(index: int) -> str:
    """sda ... sdz, sdaa ...: the kernel's sd naming."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(97 + rest) + letters
    return "sd" + letters


def build_host(root: str, maps: int, paths: int, subsystems: int, controllers: int) -> None:
    b = MachineBuilder(root)
    b.cpus(sockets=2, cores_per_socket=8, threads_per_core=2, numa_nodes=2)
    hbas = []
    for index in range(4):
        node = index // 2
        host = b.host_bridge(f"{index:04x}:00")
        port, hba = f"{index:04x}:00:01.0", f"{index:04x}:01:00.0"
        b.root_port(host, port, speed=16.0, width=8, numa_node=node)
        b.attach(port, 16.0, 8)
        b.pci(port, hba, class_code=0x010700, vendor=0x1000, device=0x00e6, numa_node=node, max_speed=16.0,
              max_width=8, cur_speed=16.0, cur_width=8, driver="mpt3sas")
        hbas.append(b.scsi_host(hba))
    lines = []
    disk = 0
    for m in range(maps):
        slaves = []
        for p in range(paths):
            host = hbas[p % len(hbas)]
            host_no = int(host.rsplit("host", 1)[1])
            name = disk_name(disk)
            b.scsi_disk(host, f"{host_no}:0:{m}:0", vendor="NETAPP", model="LUN C-Mode", size_bytes=1 << 40,
                        name=name, dev=f"{8 + disk // 16 * 57 % 200}:{disk % 16 * 16}")
            set_wwid(b, name, f"naa.600a0980383030534{m:07x}")
            slaves.append(name)
            disk += 1
        dm_map(b, m, f"mpath{m}", f"3600a0980383030534{m:07x}", slaves, 1 << 40)
        lines.append(status_line(f"mpath{m}", 1 << 40, [("A", [(devno(b, s), True, 0) for s in slaves])]))
    dmsetup_status(b, lines)
    ctrl = 0
    for s in range(subsystems):
        found = []
        for c in range(controllers):
            found.append(dict(name=f"nvme{ctrl}", transport="tcp", state="live",
                              ana="optimized" if c % 2 == 0 else "non-optimized",
                              address=f"traddr=10.0.{c}.{s},trsvcid=4420"))
            ctrl += 1
        fabric_subsystem(b, s, nqn=f"nqn.2014-08.org.example:bench.{s}", model="Bench Array", serial=f"B{s:08d}",
                         iopolicy="numa", controllers=found, namespaces=[Namespace(size_bytes=1 << 40)])
    b.finish()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--maps", type=int, default=64)
    parser.add_argument("--paths", type=int, default=4)
    parser.add_argument("--subsystems", type=int, default=32)
    parser.add_argument("--controllers", type=int, default=4)
    parser.add_argument("--scrapes", type=int, default=40)
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="storpath-bench-paths-")
    try:
        root = os.path.join(work, "host")
        build_host(root, args.maps, args.paths, args.subsystems, args.controllers)
        flags = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured"]
        import requests

        with run_exporter(flags, work) as on, run_exporter(flags + OFF, work) as off:
            sessions = {name: requests.Session() for name in ("on", "off")}
            urls = {"on": on.url + "/metrics", "off": off.url + "/metrics"}
            first = sessions["on"].get(urls["on"]).text
            sessions["off"].get(urls["off"]).raise_for_status()
            path_series = [line for line in first.splitlines()
                           if line and not line.startswith("#") and PATH_FAMILIES.match(line)]
            nvme_series = sum(1 for line in path_series if line.startswith("storpath_nvme"))
            latencies = {"on": [], "off": []}
            cpu = {name: cpu_seconds(proc.proc.pid) for name, proc in (("on", on), ("off", off))}

            def other(_i):
                latencies["off"].extend(_scrapes(sessions["off"], urls["off"], 1))

            latencies["on"] = _scrapes(sessions["on"], urls["on"], args.scrapes, before=other)
            cpu = {name: (cpu_seconds(proc.proc.pid) - cpu[name]) / args.scrapes
                   for name, proc in (("on", on), ("off", off))}
        map_paths, nvme_paths = args.maps * args.paths, args.subsystems * args.controllers
        result = {
            "maps": args.maps, "paths_per_map": args.paths, "subsystems": args.subsystems,
            "controllers_per_subsystem": args.controllers,
            "path_series": len(path_series),
            "series_per_map_path": round((len(path_series) - nvme_series) / map_paths, 2),
            "series_per_nvme_path": round(nvme_series / nvme_paths, 2),
            "p50_ms_with": _ms(statistics.median(latencies["on"])),
            "p50_ms_without": _ms(statistics.median(latencies["off"])),
            "cpu_ms_per_scrape_with": round(cpu["on"] * 1000, 1),
            "cpu_ms_per_scrape_without": round(cpu["off"] * 1000, 1),
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
