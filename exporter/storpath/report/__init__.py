"""What is made of a snapshot: the exporter's scrape (exporter, reloads), `storpath check`'s
findings, `storpath tree`, `storpath capture`, and docs/metrics.md (metricsdoc)."""
