"""Makes every picture the README and docs/ show, from an example machine and the benchmark's
figures (`scripts/make-images`, `make pictures`):

- tree.svg: `storpath tree --example gen4-at-gen3` as a terminal shows it in colour (the hop
  that limits in red), written directly as SVG text;
- scrape-cost.svg: a scrape's p50 against the host's size, storpath's beside node_exporter's
  pcidevice collector, from the last benchmark table of docs/performance.md (the rows README's
  benchmark paragraph gives, read by docs/readme.py);
- landing.png: the exporter's landing page (`/`) serving the same example after one scrape,
  screenshotted by Debian's headless Chromium. Chromium's pixels are not byte-stable, so the
  page's HTML is what is compared: its SHA-256 is kept in landing.html.sha256.

`--check` writes nothing and fails when a picture (or the landing page's hash) is not what
today's code and figures make (tests/e2e/test_images.py runs it)."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import html
import importlib.util
import io
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = "gen4-at-gen3"
PERFORMANCE = os.path.join(REPO, "docs", "performance.md")

# ---- the tree ---------------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[([0-9;]*)m")
COLOURS = {"31": "#f0605a", "33": "#e5b94e"}
CHAR_W, LINE_H, PAD = 8.4, 18, 14


def tree_text() -> str:
    """The tree as `storpath tree --color=always` prints it on an 80-column terminal."""
    sys.path.insert(0, os.path.join(REPO, "exporter"))
    from storpath import cli

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")  # a UTF-8 terminal: box drawing, not ASCII
    try:
        with contextlib.redirect_stdout(out):
            cli.main(["tree", "--example", EXAMPLE, "--color=always"])
        out.flush()
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved
    return raw.getvalue().decode("utf-8")


def tree_svg(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    width = round(PAD * 2 + CHAR_W * max(len(ANSI.sub("", line)) for line in lines))
    height = PAD * 2 + LINE_H * len(lines)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
           f'font-size="14">',
           f'<title>storpath tree --example {EXAMPLE}</title>',
           f'<rect width="{width}" height="{height}" rx="6" fill="#1e2127"/>']
    for index, line in enumerate(lines):
        y = PAD + LINE_H * index + 13
        spans, bold, colour, pos = [], False, None, 0
        for match in list(ANSI.finditer(line)) + [None]:
            end = match.start() if match else len(line)
            if end > pos:
                attrs = (' font-weight="bold"' if bold else "") + f' fill="{colour or "#d7dae0"}"'
                spans.append(f"<tspan{attrs}>{html.escape(line[pos:end], quote=False)}</tspan>")
            if match is None:
                break
            codes = match.group(1).split(";")
            if codes == ["0"] or codes == [""]:
                bold, colour = False, None
            else:
                bold = bold or "1" in codes
                colour = next((COLOURS[c] for c in codes if c in COLOURS), colour)
            pos = match.end()
        if spans:
            out.append(f'<text x="{PAD}" y="{y}" xml:space="preserve">{"".join(spans)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---- the plot ---------------------------------------------------------------------------------

def _readme():
    """docs/readme.py, which reads the last benchmark table for README's paragraph: the plot draws the same rows."""
    spec = importlib.util.spec_from_file_location("docs_readme", os.path.join(REPO, "docs", "readme.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def cost_rows(text: str):
    """(PCI devices, storpath p50 ms, node_exporter p50 ms) of each run of the change measured in
    the last benchmark table of docs/performance.md, and that benchmark."""
    bench = _readme().last_benchmark(text)
    return [(run.functions, run.p50_ms, run.node_exporter_p50_ms) for run in bench.runs], bench


def plot_svg(rows, bench) -> str:
    w, h, left, right, top, bottom = 640, 400, 64, 170, 44, 52
    xmax = 500 * -(-max(r[0] for r in rows) * 1.1 // 500)
    ymax = 100 * -(-max(r[2] for r in rows) // 100)
    px = lambda x: left + (w - left - right) * x / xmax  # noqa: E731
    py = lambda y: h - bottom - (h - top - bottom) * y / ymax  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
           f'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">',
           "<title>Scrape cost against host size: storpath and node_exporter's pcidevice collector</title>",
           f'<rect width="{w}" height="{h}" fill="#ffffff"/>',
           f'<text x="{left}" y="24" font-size="14" font-weight="bold">Scrape p50 against host size '
           f'(2-core VM, {html.escape(bench.date)})</text>']
    for x in range(0, int(xmax) + 1, 500):
        out.append(f'<line x1="{px(x):.1f}" y1="{py(0):.1f}" x2="{px(x):.1f}" y2="{py(ymax):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{px(x):.1f}" y="{py(0) + 16:.1f}" text-anchor="middle">{x}</text>')
    step = 100 if ymax <= 1000 else 200
    for y in range(0, int(ymax) + 1, step):
        out.append(f'<line x1="{px(0):.1f}" y1="{py(y):.1f}" x2="{px(xmax):.1f}" y2="{py(y):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{px(0) - 6:.1f}" y="{py(y) + 4:.1f}" text-anchor="end">{y}</text>')
    out.append(f'<text x="{(px(0) + px(xmax)) / 2:.1f}" y="{h - 12}" text-anchor="middle">PCI devices on the host '
               f'(one NVMe drive and its port each)</text>')
    out.append(f'<text transform="translate(16 {(py(0) + py(ymax)) / 2:.1f}) rotate(-90)" text-anchor="middle">'
               f'scrape p50, ms</text>')
    sizes = sorted({r[0] for r in rows})
    for column, colour in ((1, "#1f6feb"), (2, "#d1495b")):
        means = [(size, sum(r[column] for r in rows if r[0] == size) / sum(1 for r in rows if r[0] == size))
                 for size in sizes]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in means)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for row in rows:
            out.append(f'<circle cx="{px(row[0]):.1f}" cy="{py(row[column]):.1f}" r="3.5" fill="{colour}"/>')
    lx = w - right + 14
    legend = [("storpath", "#1f6feb"), ("node_exporter,", "#d1495b"), ("pcidevice only", None),
              ("a dot per run,", None), ("the line their mean", None)]
    for index, (label, colour) in enumerate(legend):
        ly = top + 14 + 20 * index + (12 if index >= 3 else 0)
        if colour:
            out.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 26}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 32}" y="{ly}">{html.escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---- the landing page -------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def landing_html() -> bytes:
    """The landing page of `storpath serve --example`, after one scrape."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.path.join(REPO, "exporter")}
    proc = subprocess.Popen([sys.executable, "-m", "storpath", "serve", "--example", EXAMPLE,
                             f"--web.listen-address=127.0.0.1:{port}"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/metrics", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("storpath serve --example did not answer")
                time.sleep(0.1)
        return urllib.request.urlopen(base + "/", timeout=10).read()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# "From the scrape that finished 2026-11-28 03:06:09 UTC (0 s ago)": the one part that changes
SCRAPE_TIME = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+ s ago\)")


def page_hash(page: bytes) -> str:
    """The landing page's SHA-256, with the time of its scrape left out."""
    return hashlib.sha256(SCRAPE_TIME.sub(b"(time of the scrape)", page)).hexdigest()


def screenshot(page: bytes, png: str) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("make-images: chromium is missing (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "landing.html")
        with open(source, "wb") as handle:
            handle.write(page)
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={folder}/profile", "--window-size=1000,1010",
                        f"--screenshot={png}", f"file://{source}"],
                       check=True, capture_output=True, timeout=120)


# ---- all of them ------------------------------------------------------------------------------

def made() -> dict:
    """name -> bytes of each file written here (the landing page as its hash)."""
    with open(PERFORMANCE, encoding="utf-8") as handle:
        rows, bench = cost_rows(handle.read())
    page = landing_html()
    return {"tree.svg": tree_svg(tree_text()).encode(), "scrape-cost.svg": plot_svg(rows, bench).encode(),
            "landing.html.sha256": f"{page_hash(page)}  landing page of "
                                   f"`storpath serve --example {EXAMPLE}` that landing.png shows\n".encode(),
            "_landing": page}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a picture is not current; write nothing")
    args = parser.parse_args(argv)
    files = made()
    page = files.pop("_landing")
    stale = []
    for name, data in files.items():
        path = os.path.join(HERE, name)
        current = open(path, "rb").read() if os.path.exists(path) else None
        if current != data:
            stale.append(name)
            if not args.check:
                with open(path, "wb") as handle:
                    handle.write(data)
    if args.check:
        if not os.path.exists(os.path.join(HERE, "landing.png")):
            stale.append("landing.png")
        if stale:
            print(f"make-images: stale: {', '.join(stale)}: run scripts/make-images", file=sys.stderr)
            return 1
        return 0
    if "landing.html.sha256" in stale or not os.path.exists(os.path.join(HERE, "landing.png")):
        screenshot(page, os.path.join(HERE, "landing.png"))
    for name in stale:
        print(f"make-images: wrote docs/images/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
