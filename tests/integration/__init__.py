"""Integration tier: real Prometheus, Alertmanager, node_exporter and the storpath exporter."""
