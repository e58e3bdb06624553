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
