"""storpath(1), written from the command line's own argparse parser (cli.build_parser), so the
manual lists exactly the subcommands and flags `storpath --help` does.

    python3 -m storpath.manpage > storpath.1     (debian/rules does this at package build)
"""

from __future__ import annotations

import argparse
import sys
from typing import Iterator, List, Optional, Tuple

from storpath import __version__
from storpath.cli import build_parser

SEE_ALSO = "prometheus(1), prometheus-node-exporter(1), nvme(1), fio(1)"


def roff(text: str) -> str:
    """Plain text as roff: backslashes and hyphens escaped, no line starting with a control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line if line[:1] in (".", "'") else line) for line in text.splitlines())


def subcommands(parser: argparse.ArgumentParser) -> List[Tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order --help lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return []


def option_groups(parser: argparse.ArgumentParser) -> Iterator[Tuple[str, List[argparse.Action]]]:
    """(title, actions) of each argument group with a shown option, as --help groups them."""
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if a.option_strings and a.help is not argparse.SUPPRESS
                   and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]
        if actions:
            yield group.title or "options", actions


def flag(action: argparse.Action) -> str:
    """The option as roff: bold names, the value in italics."""
    names = ", ".join(f"\\fB{roff(name)}\\fR" for name in action.option_strings)
    if action.nargs == 0:
        return names
    if action.choices:
        value = "{" + ",".join(str(c) for c in action.choices) + "}"
    else:
        value = action.metavar or action.dest.upper()
    return f"{names}=\\fI{roff(str(value))}\\fR"


def positionals(parser: argparse.ArgumentParser) -> List[argparse.Action]:
    return [a for a in parser._actions if not a.option_strings and a.help is not argparse.SUPPRESS
            and not isinstance(a, argparse._SubParsersAction)]


def render(parser: Optional[argparse.ArgumentParser] = None) -> str:
    if parser is None:
        parser = build_parser()
    commands = subcommands(parser)
    lines = [
        f'.TH STORPATH 1 "" "storpath {__version__}" "User Commands"',
        ".SH NAME",
        "storpath \\- " + roff(parser.description[:1].lower() + parser.description[1:].rstrip(".")),
        ".SH SYNOPSIS",
        ".B storpath",
        "\\fISUBCOMMAND\\fR [\\fIOPTIONS\\fR]",
        ".br",
        ".B storpath",
        "\\fB\\-\\-version\\fR",
        ".SH DESCRIPTION",
        roff(parser.description or ""),
        ".PP",
        roff(parser.epilog or ""),
        ".SH SUBCOMMANDS",
    ]
    for name, help_text, _ in commands:
        lines += [".TP", f"\\fB{name}\\fR", roff(help_text)]
    for name, _, sub in commands:
        lines += [f'.SH "STORPATH {name.upper()}"', ".B storpath " + name, "[\\fIOPTIONS\\fR]"]
        lines += [f"[\\fI{roff(a.metavar or a.dest).upper()}\\fR]" for a in positionals(sub)]
        lines += [".PP", roff(sub.description or "")]
        if sub.epilog:
            lines += [".PP", roff(sub.epilog)]
        for action in positionals(sub):
            lines += [".TP", f"\\fI{roff(action.metavar or action.dest).upper()}\\fR", roff(action.help or "")]
        for title, actions in option_groups(sub):
            lines += [f".SS {roff(title[:1].upper() + title[1:])}"]
            for action in actions:
                lines += [".TP", flag(action), roff(action.help % vars(action) if action.help else "")]
    lines += [".SH SEE ALSO", roff(SEE_ALSO),
              ".PP", "The documentation in /usr/share/doc/prometheus-storpath-exporter and at",
              ".UR https://github.com/storpath/storpath", ".UE", ""]
    return "\n".join(line for line in lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m storpath.manpage", description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", help="write here instead of standard output")
    args = parser.parse_args(argv)
    text = render()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
