#!/usr/bin/env python3
"""README.md's parts that tell what the code is and what the last measurement found, generated
so that they cannot drift from either:

- `collectors`: the table of collectors, from the collector registry (storpath.collectors: each
  collector's name, its docstring's first line, whether it is on by default) and the sources it
  reads: every scrape (sysfs and procfs; once, at start, for what cannot change while the machine
  runs) and its slow sources' background tasks with their default intervals (storpath.scrape.slow);
- `benchmark`: the benchmark paragraph and the plot under it (docs/images/scrape-cost.svg, drawn
  by docs/images/generate.py from the same rows), from the last table of `python -m
  benchmarks.scrape` in docs/performance.md: its rows of the change measured (those whose run
  begins with "after"; all of them when none does), its section's date, and the node_exporter
  version named last before it.

Each part lies between `<!-- generated: NAME -->` and `<!-- /generated: NAME -->` lines of
README.md; the rest of README is written by hand.

    python docs/readme.py            write the parts (`make docs` does it with docs/metrics.md)
    python docs/readme.py --check    exit 1, naming the parts, when README.md is not what this makes

tests/unit/test_readme_generated.py runs the check.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import textwrap
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
README = os.path.join(REPO, "README.md")
PERFORMANCE = os.path.join(REPO, "docs", "performance.md")
BLOCK = re.compile(r"(<!-- generated: ([a-z]+) -->\n)(.*?)(<!-- /generated: \2 -->)", re.S)
NOTICE = "<!-- written by docs/readme.py from {source}: edit that, then `make docs` -->\n"


# ---- the collectors -------------------------------------------------------------------------

def _duration(seconds: float) -> str:
    for unit, size in (("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


def _interval(slow_cls, collector_cls) -> float:
    """A slow source's default interval: its collector's setting, or its own config's (the probes')."""
    from storpath.base.roots import Roots

    settings = dict(collector_cls.config_defaults)
    if slow_cls.interval_key in settings:
        return float(settings[slow_cls.interval_key])
    return float(slow_cls(Roots(), settings, {}).config.interval)


def collectors_table() -> str:
    sys.path.insert(0, os.path.join(REPO, "exporter"))
    from storpath.base.roots import Roots
    from storpath.collectors import load_all
    from storpath.scrape import slow
    from storpath.scrape.snapshot import sysfs_sources

    fast = sysfs_sources(Roots())
    lines = ["| collector | what | when |", "|---|---|---|"]
    for name, spec in load_all().items():
        cls = spec.cls
        used = [source for source in cls.reads + cls.enriches if source in fast]
        when = []
        if used:
            when.append("once, at start" if all(fast[source].once for source in used) else "every scrape")
        background = []
        for source in (s for s in slow.SLOW if s.collector == name):
            task = f"`{source.task}` every {_duration(_interval(source, cls))}"
            if source.only_when:  # runs only where configured (the probes' targets, a helper)
                task += f" {source.only_when}"
            background.append(task)
        if background:
            when.append("in the background: " + ", ".join(background))
        what = spec.help.rstrip(".").replace("|", "\\|")
        if not spec.default_enabled:
            what += " (off by default)"
        lines.append(f"| `{name}` | {what} | {'; '.join(when)} |")
    return "\n".join(lines) + "\n"


# ---- the benchmark ---------------------------------------------------------------------------

COLUMNS = ("functions", "p50", "CPU/scrape", "bare reads", "CPU / bare", "node_exporter p50", "p50 ratio")


@dataclass(frozen=True)
class Run:
    label: str
    functions: int
    p50_ms: float
    cpu_ms: float
    cpu_per_bare: float
    node_exporter_p50_ms: float
    ratio: float


@dataclass(frozen=True)
class Benchmark:
    section: str  # the heading of its section in docs/performance.md
    date: str
    node_exporter: str  # the version measured against, "1.12.1"
    runs: List[Run]  # the rows of the change measured

    def at(self, functions: int) -> List[Run]:
        return [run for run in self.runs if run.functions == functions]

    def sizes(self) -> List[int]:
        return sorted({run.functions for run in self.runs})


def _ms(cell: str) -> float:
    return float(cell.replace("ms", "").strip())


def last_benchmark(text: str) -> Benchmark:
    """The last table of benchmarks.scrape's figures in docs/performance.md."""
    lines = text.splitlines()
    found = None
    for index, line in enumerate(lines[:-1]):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and lines[index + 1].startswith("|---") and set(COLUMNS) <= set(cells):
            found = (index, cells)
    if found is None:
        raise ValueError(f"{PERFORMANCE}: no table with the columns {', '.join(COLUMNS)}")
    start, header = found
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (cell.strip() for cell in line.strip().strip("|").split("|")))))
    before = "\n".join(lines[:start])
    section = re.findall(r"^## (.+)$", before, re.M)[-1]
    date = re.search(r"\((\d{4}-\d\d-\d\d)\)", section)
    version = re.findall(r"node_exporter v?(\d+\.\d+\.\d+)", before)
    if not date or not version:
        raise ValueError(f"{PERFORMANCE}: the last benchmark table's section {section!r} has no date, "
                         "or no node_exporter version is named before it")
    runs = [Run(row[header[0]], int(row["functions"].replace(" ", "")), _ms(row["p50"]), _ms(row["CPU/scrape"]),
                float(row["CPU / bare"]), _ms(row["node_exporter p50"]), float(row["p50 ratio"])) for row in rows]
    measured = [run for run in runs if run.label.lower().startswith("after")] or runs
    return Benchmark(section, date.group(1), version[-1], measured)


def benchmark() -> Benchmark:
    with open(PERFORMANCE, encoding="utf-8") as handle:
        return last_benchmark(handle.read())


def _span(values: Sequence[float], form: Callable[[float], str]) -> str:
    low, high = form(min(values)), form(max(values))
    return low if low == high else f"{low}-{high}"


def _count(number: int) -> str:
    return f"{number:,}".replace(",", " ")


def benchmark_paragraph(bench: Benchmark) -> str:
    small, large = bench.sizes()[0], bench.sizes()[-1]
    ratio = lambda runs: _span([r.ratio for r in runs], lambda v: f"{v:.2f}")  # noqa: E731
    mean = lambda runs, field: round(statistics.mean(getattr(r, field) for r in runs))  # noqa: E731
    prose = (
        "Benchmark (not a test): `make bench` scrapes the real exporter on synthetic hosts of NVMe drives "
        f"over HTTP, beside node_exporter v{bench.node_exporter} with only its pcidevice collector on the same "
        f"tree. The last measurement (docs/performance.md, \"{bench.section}\"), on the 2-core development VM: "
        f"a scrape of the host of {_count(large // 2)} drives ({_count(large)} PCI devices) took "
        f"{ratio(bench.at(large))} of node_exporter's at the median ({ratio(bench.at(small))} at "
        f"{_count(small)} PCI devices), {_span([r.cpu_ms for r in bench.at(large)], lambda v: f'{v:.0f}')} ms of CPU, "
        f"{_span([r.cpu_per_bare for r in bench.at(large)], lambda v: f'{v:.1f}')} times the bare reads of the "
        "same files; what it costs, how it stays cheap and the history of the figures: "
        "[docs/performance.md](docs/performance.md).")
    return (
        textwrap.fill(prose, width=100, break_long_words=False, break_on_hyphens=False) + "\n\n"
        f"![Scrape p50 against the number of PCI devices ({bench.date}): storpath's {mean(bench.at(small), 'p50_ms')} "
        f"ms at {_count(small)} and {mean(bench.at(large), 'p50_ms')} ms at {_count(large)}, node_exporter's "
        f"pcidevice collector's {mean(bench.at(small), 'node_exporter_p50_ms')} and "
        f"{mean(bench.at(large), 'node_exporter_p50_ms')} ms](docs/images/scrape-cost.svg)\n")


# ---- README ----------------------------------------------------------------------------------

def parts() -> Dict[str, str]:
    return {
        "collectors": NOTICE.format(source="the collector registry and storpath.scrape.slow") + collectors_table(),
        "benchmark": NOTICE.format(source="the last benchmark table of docs/performance.md")
        + benchmark_paragraph(benchmark()),
    }


def render(readme: str, made: Dict[str, str]) -> str:
    placed = [match.group(2) for match in BLOCK.finditer(readme)]
    if sorted(placed) != sorted(made):
        raise ValueError(f"README.md places the generated parts {placed}, expected each of {sorted(made)} once")
    return BLOCK.sub(lambda m: m.group(1) + made[m.group(2)] + m.group(4), readme)


def stale(readme: str, made: Dict[str, str]) -> List[str]:
    now = {match.group(2): match.group(3) for match in BLOCK.finditer(readme)}
    return sorted(name for name, text in made.items() if now.get(name) != text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md's generated parts are not current")
    args = parser.parse_args(argv)
    with open(README, encoding="utf-8") as handle:
        readme = handle.read()
    made = parts()
    text = render(readme, made)
    if args.check:
        behind = stale(readme, made)
        if behind:
            print(f"README.md: stale generated parts: {', '.join(behind)}: run python docs/readme.py "
                  "(make docs)", file=sys.stderr)
            return 1
        return 0
    if text != readme:
        with open(README + ".tmp", "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(README + ".tmp", README)
        print("docs/readme.py: wrote README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
