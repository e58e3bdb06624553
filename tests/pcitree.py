"""The PCI tree of a fixture machine read once, with its port types, as the snapshot's
`pci` source reads it."""

from storpath.analysis.topology import with_port_types
from storpath.readers.pci import PciReader


def read_pci_tree(roots):
    return with_port_types(PciReader(roots).read_with_problems())[0]
