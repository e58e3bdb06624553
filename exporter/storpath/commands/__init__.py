"""Subcommands: each module defines `add_parser(subparsers, common)` that sets `run`."""
