"""storpath(1) is written from the parser itself (storpath.manpage, run by debian/rules at package
build): every subcommand and every flag `--help` shows is in it, and groff reads it without a
warning. `--help` shows --no-collector.NAME beside --collector.NAME."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess

import pytest

from storpath import cli, manpage
from storpath.collectors import load_all
from tests.conftest import require_tool


def shown_flags(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if action.option_strings and action.help is not argparse.SUPPRESS:
            yield from action.option_strings


def plain(page: str) -> str:
    return page.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "").replace("\\e", "\\")


def test_every_subcommand_and_flag_of_the_parser_is_in_the_page():
    parser = cli.build_parser()
    page = plain(manpage.render(parser))
    commands = manpage.subcommands(parser)
    assert {name for name, _, _ in commands} >= {"serve", "check", "capture", "tree", "probe"}
    for name, help_text, sub in commands:
        assert f'.SH "STORPATH {name.upper()}"' in page and help_text in page, name
        section = page.split(f'.SH "STORPATH {name.upper()}"')[1].split(".SH ")[0]
        for option in shown_flags(sub):
            if option not in ("-h", "--help"):
                assert f"\n{option}" in section or f", {option}" in section, f"{name}: {option} not in the page"


def test_a_flag_added_to_the_parser_appears_in_the_page():
    parser = cli.build_parser()
    serve = dict((n, p) for n, _, p in manpage.subcommands(parser))["serve"]
    serve.add_argument("--web.example-flag", dest="example", metavar="THING", help="A flag for this test.")
    page = plain(manpage.render(parser))
    assert "--web.example-flag=THING\nA flag for this test." in page


def test_groff_reads_it_without_warnings():
    groff = require_tool("groff", "groff-base")
    result = subprocess.run([groff, "-man", "-ww", "-z", "-Tutf8"], input=manpage.render(), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == "", result.stderr


@pytest.mark.parametrize("command", ["serve", "check", "tree", "capture"])
def test_help_shows_how_to_turn_each_collector_off(command):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.main([command, "--help"])
    for name in load_all():
        assert f"--no-collector.{name}" in out.getvalue() and f"--collector.{name}" in out.getvalue(), name
