"""NUMA locality: storage whose NUMA node is unknown on a multi-node machine; md arrays whose
members sit on different nodes. Neither is judged in a virtual machine, where the host's NUMA
placement is not visible."""

CTRL = "storpath_numa_storage_controller_node"
NODES = "storpath_numa_node_info"
VM = 'storpath_host_info{virtualization="vm"}'


def rules(c):
    cfg = c.cfg
    return [
        c.alert(
            "StorageNumaNodeUnknown",
            # Judged per storage controller (PCI class 01): one alert for an HBA, not one per disk.
            # Only where placement is knowable: not in a virtual machine (a vNUMA guest puts every
            # device at -1; the host's placement is not visible from it).
            c.expr("""
                ${ctrl} == -1
                and ${on_target}
                (count ${by} (${nodes}) > 1)
                unless ${on_target}
                ${vm}
            """, ctrl=CTRL, nodes=NODES, on_target=c.on(), by=c.by(), vm=VM),
            cfg.unknown_node_for, "warning",
            "A storage controller has no NUMA node on a machine with several.",
            f"""Storage controller {{{{ $labels.address }}}}
            ({c.show("storpath_block_device_info", ("address",), field=".Labels.device", join=", ")}) reports
            NUMA node -1 on a machine with {c.show(NODES, (), fmt="%.0f", aggregate="count")}
            nodes: the firmware did not describe where it is attached, so the kernel cannot keep its
            interrupts and memory near it.""",
        ),
        c.alert(
            "MdArraySpansNumaNodes",
            c.expr("""
                storpath_md_member_numa_nodes > 1
                unless ${on_target}
                ${vm}
            """, on_target=c.on(), vm=VM),
            cfg.md_spans_nodes_for, "info",
            "An md array has members on different NUMA nodes.",
            """The working members of {{ $labels.device }} sit behind PCI functions on {{ printf "%.0f" $value }}
            different NUMA nodes: part of every stripe's I/O crosses the interconnect between them.""",
        ),
    ]
