# Fleet scale (included by the top-level Makefile): N simulated storpath hosts scraped by
# Debian's Prometheus every 15 s; series, ingestion, memory, rule evaluation and dashboard
# query times. A benchmark, not a test; figures in docs/fleet-scale.md.
#   make bench-fleet                               100, 500 and 2000 hosts, 60 s per phase (~30 min on 2 cores)
#   make bench-fleet FLEET_SIZES=1000,5000 FLEET_PHASE=120 FLEET_JSON=fleet.json

FLEET_SIZES ?= 100,500,2000
FLEET_PHASE ?= 60
FLEET_JSON ?=

.PHONY: bench-fleet
bench-fleet: setup
	$(PY) -m benchmarks.fleet --sizes $(FLEET_SIZES) --phase $(FLEET_PHASE) $(if $(FLEET_JSON),--json $(FLEET_JSON))
