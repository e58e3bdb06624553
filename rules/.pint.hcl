// pint (github.com/cloudflare/pint) on the rule files, each exception with its reason:
//   pint --offline --config rules/.pint.hcl lint rules/*.yml
// tests/rules/test_rules.py keeps the conventions pint and mixtool check (summaries are sentences,
// recording rules named level:metric:operation, every alert tested).

rule {
  match {
    path = "rules/capacity\\.yml"
    name = "zpool:storpath_zfs_pool_capacity:avg5m"
  }
  // The capacity group (evaluated every capacity.evaluation_interval, 5m) averages 5 minutes of
  // the zfs group's pool ratio, which the zfs alerts need at every evaluation and so stays in
  // that group: which of the two groups runs first in a cycle moves a 5-minute average by at
  // most one sample.
  disable = ["rule/dependency"]
}

rule {
  match {
    path = "rules/capacity\\.yml"
    name = "instance_device:storpath_block_device_(read|written)_bytes:rate5m"
  }
  // The 5-minute disk rates find a host's node_exporter two ways and keep one (rules/generate.py
  // node_exporter_series): by its instance, `or ignoring(nodename)` by node_uname_info's nodename,
  // which label_replace writes into `instance` (kube-prometheus-stack's node-exporter keeps
  // <pod ip>:9100 as its instance). pint's promql/impossible follows the labels of each side but
  // not label_replace's rewrite of `instance`, and reports that the right side can never match:
  // it does, as capacity.test.yml's "node_exporter found by instance ... and by node_uname_info's
  // nodename" shows with promtool (node-b is found only through it).
  disable = ["promql/impossible"]
}
