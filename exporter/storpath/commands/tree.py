"""`storpath tree`: `storpath check --tree` under a name of its own. The same reads,
findings and exit status as `storpath check`; the output is the topology tree
(storpath.report.tree)."""

from __future__ import annotations

from storpath.commands import check


def add_parser(sub, common):
    parser = sub.add_parser(
        "tree", parents=[common], help="Show the storage topology as a tree, with what is wrong on each hop.",
        description="Show the PCIe hierarchy from each root port down to block devices, md arrays and ZFS pools: "
                    "every hop's current, expected and maximum link, the hop that limits a device, NUMA nodes and "
                    "the worst finding on each device. The same as `storpath check --tree`; exit status as for "
                    "`storpath check`.")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="Colour the tree: auto (default) colours only on a terminal and honours NO_COLOR.")
    check.add_tree_arguments(parser, flag=False)
    check.add_lspci_argument(parser)
    parser.set_defaults(run=check.run, config_error_status=3, tree=True, json=False)
