# Developer entry points. The README's two commands (scripts/run-exporter, scripts/test)
# do not need make; these targets are shortcuts for working on storpath.
PY ?= .venv/bin/python

.PHONY: help setup test test-fast golden docs bench bench-load run
help:
	@echo "make setup      venv with storpath and test deps (plus Debian packages)"
	@echo "make test-fast  parsers, analysis, house and alert rules, golden expositions (no Docker, no QEMU): the inner loop, at most 5 minutes"
	@echo "make test       the whole suite, as CI runs it (./scripts/test)"
	@echo "make golden     regenerate golden expositions and trees after an intended change"
	@echo "make docs       regenerate docs/metrics.md and README's collectors table and benchmark paragraph"
	@echo "make bench      scrape-cost benchmark on synthetic hosts, beside node_exporter's pcidevice collector"
	@echo "make bench-load load on the HTTP side: 200 concurrent scrapes, 800 idle connections, large headers"
	@echo "make run        run the exporter on this host"

setup:
	scripts/setup-system
	scripts/setup-python --test

test:
	./scripts/test

# The inner loop (at most 5 minutes on 2 cores, measured in CONTRIBUTING.md): the parsers,
# analysis, house rules, alert rules and the fixture machines' golden expositions. The
# served exporter's end-to-end tests, dashboards and packaging, and the rules under Debian's
# promtool 2 beside 3's, run in `make test`.
FAST_TESTS := tests/unit tests/architecture tests/rules tests/e2e/test_golden.py

test-fast: setup
	$(PY) -m pytest -q -m "not integration and not lab and not promtool2" -x -n 2 --durations=10 $(FAST_TESTS)

golden: setup
	STORPATH_UPDATE_GOLDEN=1 $(PY) -m pytest -q tests/e2e/test_golden.py -k "exposition or fleet_scale"
	STORPATH_UPDATE_GOLDEN=1 $(PY) -m pytest -q tests/e2e/test_tree.py -k golden

docs:
	$(PY) -m storpath.report.metricsdoc
	$(PY) docs/readme.py

bench: setup
	$(PY) -m benchmarks.scrape

bench-load: setup
	$(PY) -m benchmarks.load
	$(PY) -m benchmarks.load --tls

run:
	./scripts/run-exporter

-include mk/*.mk
