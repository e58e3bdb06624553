"""Capacity and performance review: what the Capacity dashboard reads, recorded so that a
month of a whole fleet never re-reads raw samples at every step of a graph.

Evaluated every `capacity.evaluation_interval` (5m), not every 15 s: a review looks at days
and weeks. What one evaluation reads, per block device (N devices in the fleet):

- the 5-minute read/write rates: the node_disk counters' samples of the last 5 minutes
  (20 at a 15 s scrape), 2 x 20 N;
- the hourly maximum of the read rate: 12 N (the rate as recorded every 5 minutes);
- the peak over `peak_window` (7d) from the hourly maxima: 2016 N. The panel query it
  replaces, `max_over_time(rate(node_disk_read_bytes_total[5m])[7d:5m])`, reads 20 x 2016 N
  samples at every step of the graph (720 steps for a month at 1h);
- the link a device's reads go through, the peak's ratio to it, the per-model average: one
  sample of a few series each.

Pools (P per fleet, a handful per host): the fill level is recorded again every 5 minutes
(its 5-minute average), so the projection and the days left read `growth_window` of it
(2016 P) instead of the allocated bytes' raw samples (40 320 P at 15 s).

The rules aggregate node_exporter's and storpath's series, whose `job` labels differ: they
keep `capacity.host_labels` (the target labels without `job`), plus `device`. node_exporter's
series of a host are found as `node_exporter` in rules/config/thresholds.yml says (its jobs by
`node_exporter.selector`; its instance, or its node_uname_info's nodename where its instance is
an address, as on kube-prometheus-stack).
"""

NODE_READ = "node_disk_read_bytes_total"
NODE_WRITTEN = "node_disk_written_bytes_total"
READ_RATE = "instance_device:storpath_block_device_read_bytes:rate5m"
READ_MAX_1H = "instance_device:storpath_block_device_read_bytes:max_rate5m_1h"
READ_PEAK = "instance_device:storpath_block_device_read_bytes:peak_rate5m"
LINK = "instance_device:storpath_pcie_expected_link_bandwidth_bytes_per_second:max"
POOL_RATIO = "zpool:storpath_zfs_pool_capacity:ratio"
CAPACITY = "zpool:storpath_zfs_pool_capacity:avg5m"


def interval(c):
    """The group's evaluation interval."""
    return c.cfg.evaluation_interval


def rules(c):
    cfg = c.cfg
    keys = list(cfg.host_labels)
    by = f"by ({', '.join(keys + ['device'])})"
    on = f"on({', '.join(keys + ['device'])})"
    # Block devices storpath knows (disks and namespaces behind a PCI function) and md
    # arrays: not partitions, device-mapper or loop devices.
    known = c.expr("""
        (
          storpath_block_device_info
          or
          storpath_md_raid_disks
        )
    """)

    def rate(counter):
        # node_exporter's series found by storpath's instance (rules/generate.py node_exporter_series).
        node = c.node_exporter(lambda matcher: f"rate({counter}{{{matcher}}}[5m])" if matcher else f"rate({counter}[5m])")
        # max, not sum: the series left for one disk are the same disk seen twice at most (by its
        # instance and by its nodename, or by two node_exporter jobs the selector lets through).
        return c.expr("""
            max ${by} (
              (
                ${node}
              )
              and ${on}
              ${known}
            )
        """, by=by, on=on, node=node, known=known)

    def days_left(ratio):
        return c.expr("""
            (${ratio} - ${capacity})
            / (deriv(${capacity}[${window}]) > 0)
            / 86400
            > 0
        """, ratio=str(ratio), capacity=CAPACITY, window=cfg.growth_window)

    return [
        c.record(READ_RATE, rate(NODE_READ)),
        c.record("instance_device:storpath_block_device_written_bytes:rate5m", rate(NODE_WRITTEN)),
        c.record(READ_MAX_1H, f"max_over_time({READ_RATE}[1h])"),
        c.record(READ_PEAK, f"max_over_time({READ_MAX_1H}[{cfg.peak_window}])"),
        c.record(LINK, c.expr("""
            max ${by} (
              storpath_block_device_info
              * on(${target}, address) group_left()
              storpath_pcie_expected_link_bandwidth_bytes_per_second
            )
        """, by=by, target=", ".join(c.target_labels))),
        c.record("instance_device:storpath_block_device_read_peak:link_ratio",
                 c.expr("${peak} / ${on} (${link} > 0)", peak=READ_PEAK, on=on, link=LINK)),
        c.record("model:storpath_nvme_read_bytes:avg_rate5m", c.expr("""
            avg by (model) (
              ${rate}
              * ${on} group_left(model)
              max ${by_model} (
                storpath_block_device_info
                * on(${target}, controller) group_left(model)
                storpath_nvme_controller_info
              )
            )
        """, rate=READ_RATE, on=on, by_model=f"by ({', '.join(keys + ['device', 'model'])})",
            target=", ".join(c.target_labels))),
        c.record(CAPACITY, f"avg_over_time({POOL_RATIO}[5m])"),
        c.record("zpool:storpath_zfs_pool_capacity:predict_linear",
                 f"predict_linear({CAPACITY}[{cfg.growth_window}], {c.seconds(cfg.projection_horizon)})"),
        c.record("zpool:storpath_zfs_pool_capacity_warning:days_left",
                 days_left(c.config["zfs"]["capacity_warning_ratio"])),
        c.record("zpool:storpath_zfs_pool_capacity_critical:days_left",
                 days_left(c.config["zfs"]["capacity_critical_ratio"])),
    ]
