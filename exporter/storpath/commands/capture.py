"""`storpath capture -o FILE.tar.gz [--redact]`: the files storpath reads, in one archive.

The work is done in storpath.report.capture (files, redact, archive); this is the command line.
What is captured follows the readers: every module of storpath.readers declares the
sysfs and procfs files it reads as glob patterns relative to the root
(`CAPTURE_SYSFS`, `CAPTURE_PROCFS`; `{a,b}` alternatives and `..` are allowed), and may
define `capture_commands(roots, folder)` to save the outputs of the commands it runs
(NVMe Identify, zpool) into `folder` in the layout it reads back through Roots.captured.
A new attribute is declared once, beside the code that reads it.

sysfs symlinks are kept as symlinks (the readers resolve them to find a device's place in
the tree), so the extracted archive replays with
`storpath check|serve --path.sysfs=X/sys --path.procfs=X/proc --path.captured=X/captured`.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile

from storpath import __version__
from storpath.base import log
from storpath.report.capture.archive import archive_top, snapshot, write_archive
from storpath.report.capture.files import ReaderFiles, Tree, expand_braces, reader_files  # noqa: F401 (re-exported)
from storpath.report.capture.redact import Redactor  # noqa: F401 (re-exported)
from storpath.commands.options import roots_from

LOG = log.get("capture")

README = """\
# storpath capture

Made by storpath {version} on {created} from {sysfs} and {procfs}.
{redacted}

It holds the sysfs and procfs files storpath reads (symlinks kept as symlinks) and the
outputs of the commands it runs (`nvme id-ns`, `zpool`), in `captured/`.

Replay it:

    tar xzf {archive}
    storpath check --path.sysfs={top}/sys --path.procfs={top}/proc --path.captured={top}/captured
    storpath serve --path.sysfs={top}/sys --path.procfs={top}/proc --path.captured={top}/captured

MANIFEST.json lists what was captured, the files that could not be read, and the
commands that ran.
"""


def add_parser(sub, common):
    parser = sub.add_parser(
        "capture", parents=[common], help="Save the files storpath reads into an archive, to replay elsewhere.",
        description="Snapshot exactly the sysfs/procfs files storpath reads, and the outputs of the commands it "
                    "runs (nvme id-ns, zpool), into a .tar.gz that `storpath check` and `storpath serve` replay "
                    "with --path.sysfs/--path.procfs/--path.captured. Attach it to a bug report.")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.tar.gz", help="Archive to write.")
    parser.add_argument("--redact", action="store_true",
                        help="Replace serial numbers, WWNs, EUI-64/NGUIDs and SAS addresses, consistently across "
                             "all files, so the archive can be shared.")
    parser.set_defaults(run=run)


def run(args, config) -> int:
    roots = roots_from(config)
    if not os.path.isdir(roots.sysfs):
        print(f"storpath capture: {roots.sysfs} is not a folder (see --path.sysfs)", file=sys.stderr)
        return 3
    output = args.output
    top = archive_top(output)
    with tempfile.TemporaryDirectory(prefix="storpath-capture-") as work:
        result = snapshot(roots, work, args.redact)
        manifest = result["manifest"]
        readme = README.format(
            version=__version__, created=manifest["created"], sysfs=roots.sysfs, procfs=roots.procfs,
            redacted=("Serial numbers, WWNs, EUI-64/NGUIDs and SAS addresses are replaced by stand-ins "
                      "(consistently: one drive keeps one stand-in everywhere)." if args.redact else
                      "Not redacted: it contains serial numbers and WWNs (use --redact to replace them)."),
            archive=os.path.basename(output), top=top)
        try:
            write_archive(output, top, result["trees"], manifest, readme)
        except OSError as exc:
            print(f"storpath capture: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    files = manifest["files"]
    print(f"storpath capture: wrote {output}: {files['sys']} sysfs, {files['proc']} procfs and "
          f"{files['captured']} command output files{' (redacted)' if args.redact else ''}.", file=sys.stderr)
    for name, why in manifest["readers_not_loaded"].items():
        log.kv(LOG, logging.WARNING, "reader not loaded, its files are missing from the capture", reader=name,
               err=why)
    for command in manifest["commands"]:
        if not command.get("ok"):
            log.kv(LOG, logging.WARNING, "command outputs not captured", reader=command["reader"],
                   err=command.get("error", ""))
    print(f"Replay: tar xzf {os.path.basename(output)} && storpath check --path.sysfs={top}/sys "
          f"--path.procfs={top}/proc --path.captured={top}/captured", file=sys.stderr)
    return 0


__all__ = ["add_parser", "run", "reader_files", "expand_braces", "Tree", "Redactor", "snapshot",
           "write_archive", "archive_top"]
