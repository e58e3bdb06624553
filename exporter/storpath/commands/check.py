"""`storpath check`: the exporter's analysis as a report for a person at a terminal.

Reads the machine (or a captured tree given with --path.sysfs/--path.procfs/
--path.captured), runs every findings subsystem (storpath.report.findings) and prints the
findings grouped by device, then a summary line. Exit status: 0 clean (info findings
only), 1 warnings, 2 critical findings; 3 when the machine could not be read at all.
Usage and configuration errors exit 2 before any check runs, as for every storpath
command: scripts that must tell them apart use --json (no JSON is printed then).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import textwrap
from typing import Any, Dict, List, Optional, TextIO

from storpath import __version__
from storpath.base import safetext
from storpath.commands.options import roots_from, say_no_devices
from storpath.report.findings import _probes
from storpath.report.findings import (CRITICAL, INFO, WARNING, CheckResult, Facts, Finding, counted, natural_key,
                               run_checks, severity_rank, worst)
from storpath.report.findings import load_all as load_findings
from storpath.readers.lspci import MAX_FUNCTIONS, read_dump
from storpath.scrape.snapshot import from_lspci
from storpath.report.tree import model, sources
from storpath.report.tree import text as tree_text

EXIT_UNREADABLE = 3


def add_parser(sub, common):
    parser = sub.add_parser(
        "check", parents=[common], help="Check this machine's storage paths and print what is wrong.",
        description="Check the machine's storage paths (PCIe links, NVMe formats, SAS/SATA rates, NUMA "
                    "placement, arrays) with the exporter's own analysis and print the findings by device. "
                    "Exit status: 0 clean, 1 warnings, 2 critical findings, 3 machine not readable.")
    parser.add_argument("--json", action="store_true", help="Print the findings as JSON (for scripts).")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="Colour the report: auto (default) colours only on a terminal and honours NO_COLOR.")
    add_tree_arguments(parser, flag=True)
    add_lspci_argument(parser)
    parser.add_argument("--probe", action="store_true",
                        help="Also run the configured read-only fio probes now and include their results "
                             "(takes the probes' runtime; progress goes to stderr).")
    parser.set_defaults(run=run, config_error_status=3)


def add_tree_arguments(parser, flag: bool) -> None:
    """The tree's options, shared with `storpath tree` (storpath.commands.tree)."""
    if flag:
        parser.add_argument("--tree", action="store_true",
                            help="Print the storage topology as a tree (PCIe hops from each root port down to block "
                                 "devices, md arrays and ZFS pools) with the findings on their devices, instead of "
                                 "the report.")
    parser.add_argument("--ascii", action="store_true", help="Draw the tree with plain ASCII instead of box drawing.")


def add_lspci_argument(parser) -> None:
    """--lspci, shared with `storpath tree`."""
    parser.add_argument("--lspci", metavar="PATH",
                        help="Judge the machine an `lspci -vv` dump describes (-vvnn best) instead of this one: a "
                             "file, or a sosreport, supportconfig or hw-probe folder holding one. The same "
                             "analysis as for sysfs; what a dump cannot show (AER counters, the drives behind the "
                             "links) is listed, not guessed.")


# What an lspci dump lets storpath judge: the PCIe links (storpath.report.findings.pcie); md arrays
# too where a sosreport kept /proc/mdstat beside it.
LSPCI_SUBSYSTEMS = ("pcie",)


class _NoteCollector(logging.Handler):
    """Warnings the readers log while the check runs ('PCI attribute not usable...'),
    kept for the report's notes instead of interleaving logfmt lines with it."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.notes: List[Dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        fields = dict(getattr(record, "fields", {}) or {})
        self.notes.append({"message": record.getMessage(), **{k: str(v) for k, v in fields.items()}})


def run(args, config) -> int:
    roots = roots_from(config)
    collector: Optional[_NoteCollector] = None
    if not getattr(args, "log_level", None):
        collector = _NoteCollector()
        logger = logging.getLogger("storpath")
        logger.handlers[:] = [collector]
        logger.setLevel(logging.WARNING)
    if getattr(args, "lspci", None):
        return _run_lspci(args, config, collector)
    if not os.path.isdir(roots.sysfs):
        print(f"storpath check: {roots.sysfs} is not a folder: nothing to check (see --path.sysfs)", file=sys.stderr)
        return EXIT_UNREADABLE
    if not os.path.isdir(roots.sys("bus")) and not os.path.isdir(roots.sys("class")):
        print(f"storpath check: {roots.sysfs} does not look like sysfs (no bus/ or class/ in it)", file=sys.stderr)
        return EXIT_UNREADABLE
    say_no_devices(roots)  # a note of the report (or a log line with --log.level)
    facts = Facts(roots, config)
    result = run_checks(facts)
    probes = None
    if getattr(args, "probe", False):
        probes = _probes.run_probes(facts, config, result, progress=sys.stderr)
        result.findings.sort(key=lambda f: (severity_rank(f.severity), natural_key(f.subject), f.kind))
    return _report(args, facts, result, collector.notes if collector else [], probes, roots)


def _run_lspci(args, config, collector: Optional[_NoteCollector]) -> int:
    """`--lspci PATH`: the snapshot of the dump's machine (storpath.scrape.snapshot.from_lspci), the
    findings its data allows (LSPCI_SUBSYSTEMS), what it cannot show."""
    try:
        record, problems = read_dump(args.lspci)
    except OSError as exc:
        print(f"storpath check: cannot read the lspci dump: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    if not record.dump.devices:
        print(f"storpath check: {record.origin} holds no PCI function: is it `lspci -vv` output?", file=sys.stderr)
        return EXIT_UNREADABLE
    facts = Facts(None, config, snapshot=from_lspci(record, problems))
    subsystems = LSPCI_SUBSYSTEMS + (("md",) if record.md is not None else ())
    result = run_checks(facts, only=subsystems)
    for problem in problems:
        # What of the archive was not judged: the report says so, and the exit status is not "clean".
        fields = dict(problem.fields)
        if problem.message == "lspci dump cut":
            result.findings.append(Finding(
                record.origin, WARNING,
                f"the lspci dump was cut after {MAX_FUNCTIONS} functions: what follows is not judged",
                f"{record.origin} lists more than {MAX_FUNCTIONS} PCI functions (a PCI segment holds at most 65,536)",
                "devices listed after the cut are not checked",
                "check a dump of one machine, or split the file", kind="lspci.dump_cut", subsystem="lspci"))
        elif problem.message == "md attributes of the archive not read":
            result.findings.append(Finding(
                record.origin, WARNING, "the archive's md arrays were not read", fields["why"],
                "md arrays are not checked", "read the archive's proc/mdstat by hand",
                kind="lspci.md_not_read", subsystem="lspci"))
    _unjudged_links(record, result)
    for name in load_findings():
        if name not in subsystems:
            result.skipped[name] = "not in an lspci dump"
    missing = record.dump.cannot_show() + ([] if record.md is not None else ["md arrays (no proc/mdstat beside it)"])
    notes = collector.notes if collector else []
    notes.append({"message": f"judged from the lspci dump {record.origin}; it cannot show: " + "; ".join(missing)})
    return _report(args, facts, result, notes, None, None, dump=record)


def _unjudged_links(record, result: CheckResult) -> None:
    """Links whose speed the dump's pciutils printed as "unknown" (ls-caps.c's link_speed()
    names only the rates its version knows): no verdict on them, either way. What the
    analysis said of them (a speed it took as missing) is dropped, each gets a warning that
    names it (so the exit status is not "clean"), and they are not counted as checked."""
    unjudged = record.dump.unjudged_links()
    if not unjudged:
        return
    result.findings[:] = [f for f in result.findings
                          if not (f.subsystem == "pcie" and f.subject in unjudged)]
    for address, ends in sorted(unjudged.items(), key=lambda item: natural_key(item[0])):
        printed = "; ".join(f"{where}: {', '.join(registers)}" for where, registers in ends)
        result.findings.append(Finding(
            address, WARNING, "PCIe link not judged: pciutils printed Speed unknown",
            f"pciutils printed Speed unknown: too old for this link's generation ({printed}); "
            "its ls-caps.c names only the link speeds of its time",
            "this link's speed is neither judged below expected nor fine",
            "take the dump again with a current pciutils (lspci -vvnn), or run `storpath check` on the machine",
            kind="lspci.speed_unknown", subsystem="lspci"))
    result.checked[:] = [(n - len(unjudged), what) if what == "PCIe links" else (n, what)
                         for n, what in result.checked]
    result.findings.sort(key=lambda f: (severity_rank(f.severity), natural_key(f.subject), f.kind))


def _report(args, facts: Facts, result: CheckResult, notes: List[Dict[str, Any]],
            probes: Optional[List[Dict[str, Any]]], roots, dump=None) -> int:
    """Print the report (text, tree or JSON) and return the exit status."""
    groups = {f.subject: facts.group_of(f.subject) for f in result.findings}
    subjects = {key: facts.describe(key) for key in set(groups) | set(groups.values())}
    host = host_line(facts)
    if dump is not None:
        host = host.replace("host: unknown machine", f"host: the machine of {dump.origin}", 1) + \
            f" ({facts.host().evidence})"
    try:
        if args.json:
            data = as_json(result, subjects, groups, notes, probes, roots)
            if dump is not None:
                data["lspci"] = {"origin": dump.origin, "cannot_show": dump.dump.cannot_show()
                                 + ([] if dump.md is not None else ["md arrays (no proc/mdstat beside it)"])}
            identity = facts.host()
            data["host"] = dict(identity.dmi, hypervisor=identity.hypervisor, virtualization=identity.virtualization)
            # Names with bytes that are not UTF-8 as labels show them (`sdh\xff`), not as lone
            # surrogate escapes (`\udcff`), which strict JSON parsers refuse.
            json.dump(safetext.utf8_data(data), sys.stdout, indent=2)
            sys.stdout.write("\n")
        elif getattr(args, "tree", False):
            stream = sys.stdout
            colour = use_colour(args.color, stream)
            width = report_width(stream)
            topology = model.build(sources.from_check(facts, result))
            ascii = args.ascii or not _can_write(stream, tree_text.GLYPHS)
            stream.write("\n".join(_wrap(host, width, "", "  ")) + "\n\n")
            stream.write(tree_text.render(topology, width=width, ascii=ascii, colour=colour)
                         + "\n".join(_summary(result, width, colour)) + "\n")
        else:
            stream = sys.stdout
            colour = use_colour(args.color, stream)
            width = report_width(stream)
            stream.write("\n".join(_wrap(host, width, "", "  ")) + "\n\n")
            stream.write(render(result, subjects, notes, width=width, colour=colour, probes=probes, groups=groups))
        sys.stdout.flush()
    except BrokenPipeError:  # `storpath check --json | head`, `storpath tree | head`: stop quietly, as other tools do
        _silence_stdout()
    return result.exit_code()


def host_line(facts: Facts) -> str:
    """'host: Supermicro SYS-6028R-TR (board X10DRi, BIOS 3.2), bare metal'."""
    host = facts.host()
    dmi = host.dmi
    name = " ".join(v for v in (dmi["sys_vendor"], dmi["product_name"]) if v) or "unknown machine"
    extra = ", ".join(p for p in (f"board {dmi['board_name']}" if dmi["board_name"] else "",
                                   f"BIOS {dmi['bios_version']}" if dmi["bios_version"] else "") if p)
    kind = {"vm": f"virtual machine ({host.hypervisor})", "none": "bare metal"}.get(host.virtualization,
                                                                                   "bare metal or VM: unknown")
    return f"host: {name}" + (f" ({extra})" if extra else "") + f", {kind}"


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush at exit does not report
    the closed pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def _can_write(stream: TextIO, text: str) -> bool:
    """Whether the stream's encoding holds `text`: a locale without box drawing (an ASCII or
    Latin-1 one) gets the tree in ASCII rather than in escapes."""
    try:
        text.encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def use_colour(mode: str, stream: TextIO) -> bool:
    """Colour on a terminal only, never with NO_COLOR set (no-color.org) or TERM=dumb."""
    if mode == "never":
        return False
    if mode == "always":
        return True
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def report_width(stream: TextIO) -> int:
    """The terminal's width (COLUMNS wins), 80 when not a terminal; kept between 60 and 100
    so that long lines stay readable on a wide screen."""
    columns = 80
    if os.environ.get("COLUMNS", "").isdigit():
        columns = int(os.environ["COLUMNS"])
    elif hasattr(stream, "isatty") and stream.isatty():
        columns = shutil.get_terminal_size((80, 24)).columns
    return max(60, min(columns, 100))


# ---- text report --------------------------------------------------------------

_SGR = {CRITICAL: "1;31", WARNING: "1;33", INFO: "36", "bold": "1", "dim": "2", "ok": "1;32"}
_LABEL = {CRITICAL: "CRITICAL", WARNING: "WARNING", INFO: "INFO"}
# Keep a number and its unit on one line: "16 GT/s", "7.88 GB/s", "3.0 Gbit/s", "50 %".
_UNIT = re.compile(r"(\d) (?=(?:GT/s|GB/s|MB/s|kB/s|B/s|Gbit/s|Gbit\b|GiB|MiB|KiB|TB|GB|bytes|lanes|%|\(Gen\d\)))")
_NBSP = "\u00a0"


def _paint(text: str, style: str, colour: bool) -> str:
    return f"\033[{_SGR[style]}m{text}\033[0m" if colour else text


def _wrap(text: str, width: int, first: str, rest: str) -> List[str]:
    """`text` as lines of at most `width` columns. Every text of the report passes here, so
    this is where what the hardware named (a model, a member name) is made one line of
    plain text (storpath.base.safetext.display) before it is laid out."""
    text = safetext.display(text)
    text = _UNIT.sub(lambda m: m.group(1) + _NBSP, text)
    text = text.replace("GT/s (Gen", "GT/s" + _NBSP + "(Gen")
    # A command in backticks stays on one line when it fits one: it is meant to be copied.
    room = width - len(rest)
    text = re.sub(r"`[^`]+`", lambda m: m.group(0).replace(" ", _NBSP) if len(m.group(0)) <= room else m.group(0),
                  text)
    text = re.sub(r"\(Gen(\d)\) x", "(Gen\\1)" + _NBSP + "x", text)
    lines = textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest,
                          break_on_hyphens=False, break_long_words=False)
    return [line.replace(_NBSP, " ") for line in lines] or [first.rstrip()]


def render(result: CheckResult, subjects: Dict[str, str], notes: List[Dict[str, Any]], width: int = 80,
           colour: bool = False, probes: Optional[List[Dict[str, Any]]] = None,
           groups: Optional[Dict[str, str]] = None) -> str:
    """The report: findings grouped by the hardware they concern (worst group first),
    then probe results, notes, what was not checked, and the summary line."""
    out: List[str] = []
    group_of = groups or {}
    groups: Dict[str, List[Finding]] = {}
    for finding in result.findings:
        groups.setdefault(group_of.get(finding.subject, finding.subject), []).append(finding)
    order = sorted(groups, key=lambda s: (severity_rank(worst(f.severity for f in groups[s])), natural_key(s)))
    seen: Dict[tuple, str] = {}  # a finding repeated on several devices is spelled out once
    for subject in order:
        heading = subject + (f"  {subjects[subject]}" if subjects.get(subject) else "")
        for i, line in enumerate(_wrap(heading, width, "", " " * (len(subject) + 2))):
            out.append(_paint(line, "bold", colour) if i == 0 else line)
        for finding in sorted(groups[subject], key=lambda f: severity_rank(f.severity)):
            label = _LABEL[finding.severity]
            title = finding.title if finding.subject == subject else f"{finding.subject}: {finding.title}"
            title_lines = _wrap(title, width, " " * 12, " " * 12)
            out.append("  " + _paint(label.ljust(9), finding.severity, colour) + " " + title_lines[0][12:])
            out.extend(title_lines[1:])
            key = _repeat_key(finding)
            first = seen.setdefault(key, finding.subject)
            fields = ("evidence", "impact", "remedy")
            if first != finding.subject:
                out.extend(_wrap(f"as for {first} above", width, "    " + " " * 10, " " * 14))
                fields = ("remedy",) if _names_in(finding.remedy, finding) else ()
            for name in fields:
                value = getattr(finding, name)
                if value:
                    out.extend(_wrap(value, width, f"    {name:<9} ", " " * 14))
        out.append("")
    if probes:
        out.extend(_probes.render(probes, width))
        out.append("")
    if notes:
        out.append(_paint("notes (values storpath could not read, left out):", "dim", colour))
        for note in notes:
            fields = ", ".join(f"{k}={v}" for k, v in note.items() if k != "message")
            out.extend(_wrap(f"{note['message']}" + (f" ({fields})" if fields else ""), width, "  - ", "    "))
        out.append("")
    by_reason: Dict[str, List[str]] = {}  # one reason said once: "md, nvme, sas (not in an lspci dump)"
    for name, reason in sorted(result.skipped.items()):
        by_reason.setdefault(reason, []).append(name)
    skipped = [f"{', '.join(names)} ({reason})" for reason, names in by_reason.items()]
    if skipped:
        out.extend(_wrap("not checked: " + "; ".join(skipped), width, "", "  "))
    out.extend(_summary(result, width, colour))
    return "\n".join(out) + "\n"


def _names_in(text: str, finding: Finding) -> bool:
    return any(name and name in text for name in (finding.subject, *finding.related))


def _repeat_key(finding: Finding) -> tuple:
    """What a finding says with its own device names taken out: equal keys are repeats."""
    def strip(text: str) -> str:
        for name in sorted({finding.subject, *finding.related}, key=len, reverse=True):
            if name:
                text = text.replace(name, "<>")
        return text

    return (finding.kind, finding.severity, strip(finding.title), strip(finding.evidence), strip(finding.impact),
            strip(finding.remedy))


def _summary(result: CheckResult, width: int, colour: bool) -> List[str]:
    counts = result.counts()
    checked = ", ".join(counted(n, what) for n, what in result.checked) or "nothing"
    status = result.status()
    if status == "clean":
        head = _paint("clean", "ok", colour)
        tail = ": no problems found" + (f" ({counts[INFO]} info)" if counts[INFO] else "")
    else:
        head = _paint(status.upper(), status, colour)
        parts = [f"{counts[CRITICAL]} critical", f"{counts[WARNING]} warning" + ("s" if counts[WARNING] != 1 else ""),
                 f"{counts[INFO]} info"]
        tail = ": " + ", ".join(parts)
    plain = f"summary: {status.upper() if status != 'clean' else 'clean'}{tail}; checked {checked}."
    lines = _wrap(plain, width, "", "  ")
    lines[0] = lines[0].replace(status.upper() if status != "clean" else "clean", head, 1)
    return lines


# ---- JSON ---------------------------------------------------------------------

def as_json(result: CheckResult, subjects: Dict[str, str], groups: Dict[str, str], notes: List[Dict[str, Any]],
            probes: Optional[List[Dict[str, Any]]], roots) -> Dict[str, Any]:
    data: Dict[str, Any] = {
        "storpath_version": __version__,
        "status": result.status(),
        "exit_code": result.exit_code(),
        "counts": result.counts(),
        "checked": [{"count": n, "what": what} for n, what in result.checked],
        "subsystems": result.ran,
        "skipped": result.skipped,
        "findings": [dict(f.as_dict(), subject_description=subjects.get(f.subject, ""),
                          group=groups.get(f.subject, f.subject)) for f in result.findings],
        "notes": notes,
        "paths": ({"sysfs": roots.sysfs, "procfs": roots.procfs, "captured": roots.captured} if roots is not None
                  else {}),
    }
    if probes is not None:
        data["probes"] = probes
    return data


__all__ = ["add_parser", "run", "render", "as_json", "use_colour", "report_width", "EXIT_UNREADABLE"]
