# Release artifacts (included by the top-level Makefile). Nothing is published from here:
# `make dist` writes into dist/ what a release would carry, and tests/packaging installs each
# one the way a user would.
#   make dist          all of it, then dist/SHA256SUMS
#   make dist-python   wheel and sdist (Debian's python3-build; setuptools>=77 from PyPI in its isolated env)
#   make dist-deb      prometheus-storpath-exporter_<version>-1_all.deb (dpkg-buildpackage, debhelper, pybuild)
#   make dist-image    storpath:<version> saved with `docker save` (gzip) for `docker load`
#   make dist-chart    the Helm chart (deploy/helm/storpath) packaged at <version>
#   make dist-mixin    the monitoring mixin (mixin/: the jsonnet-bundler package, nothing outside it)
#   make mixin         regenerate mixin/ from rules/definitions, rules/config and dashboards/generate.py
#   make dist-setup    what they need on a fresh Debian/Ubuntu machine (each target above runs it first):
#                      scripts/apt-packages-dist.txt, and .venv with grafana-foundation-sdk for the mixin

DIST_VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' exporter/storpath/__init__.py)
DIST_DIR ?= dist
DIST_WORK := .cache/dist-work
DIST_IMAGE ?= storpath:$(DIST_VERSION)
# Debian's own Python and build tools, whatever python3 comes first on PATH (pyenv, a venv).
DIST_PATH := /usr/sbin:/usr/bin:/sbin:/bin

.PHONY: dist dist-python dist-deb dist-image dist-chart dist-mixin dist-sums mixin chart-files dist-buildinfo \
	dist-setup dist-venv

dist: dist-python dist-deb dist-image dist-chart dist-mixin
	$(MAKE) --no-print-directory dist-sums

# A fresh clone on a fresh machine has none of what the artifacts are built with: the Debian
# packages (idempotent: nothing is fetched when they are there), and .venv with the dashboards
# extra (mixin/generate.py builds the boards with grafana-foundation-sdk).
dist-setup: dist-venv
	scripts/setup-system scripts/apt-packages-dist.txt
	scripts/build-depends --install

dist-venv:
	scripts/setup-python --dashboards

# The git revision and branch storpath_build_info reports from an installed package (there is
# no .git beside it there); gitignored, written anew for every build.
DIST_BUILDINFO := exporter/storpath/_build_info.json
dist-buildinfo:
	printf '{"revision": "%s", "branch": "%s"}\n' "$$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
	    "$$(git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)" >$(DIST_BUILDINFO)

dist-python: dist-setup dist-buildinfo
	mkdir -p $(DIST_DIR)
	rm -f $(DIST_DIR)/storpath-$(DIST_VERSION)-*.whl $(DIST_DIR)/storpath-$(DIST_VERSION).tar.gz
	# Isolated: pyproject's SPDX license needs setuptools 77 or later, newer than Debian bookworm's.
	PATH=$(DIST_PATH) python3 -m build --outdir $(DIST_DIR) .

# The tree as committed plus what is new and not ignored, without .venv/.cache/dist.
dist-deb: dist-setup dist-buildinfo
	rm -rf $(DIST_WORK)/deb && mkdir -p $(DIST_WORK)/deb/storpath-$(DIST_VERSION) $(DIST_DIR)
	git ls-files -z -co --exclude-standard | tar --null -T - -c | tar -x -C $(DIST_WORK)/deb/storpath-$(DIST_VERSION)
	cp $(DIST_BUILDINFO) $(DIST_WORK)/deb/storpath-$(DIST_VERSION)/$(DIST_BUILDINFO)
	cd $(DIST_WORK)/deb/storpath-$(DIST_VERSION) && PATH=$(DIST_PATH) dpkg-buildpackage -us -uc -b
	mv $(DIST_WORK)/deb/*.deb $(DIST_DIR)/

dist-image: dist-setup
	mkdir -p $(DIST_DIR)
	@if [ -z "$$DOCKER_HOST" ]; then eval "$$(scripts/docker-daemon start)"; fi; \
	deploy/container/build-base-images storpath && \
	docker tag local/storpath:latest $(DIST_IMAGE) && \
	docker save $(DIST_IMAGE) | gzip -1 >$(DIST_DIR)/storpath-image-$(DIST_VERSION).tar.gz

dist-chart: dist-setup chart-files
	mkdir -p $(DIST_DIR)
	"$$(deploy/helm/build-helm)" package deploy/helm/storpath --version $(DIST_VERSION) \
	    --app-version $(DIST_VERSION) --destination $(DIST_DIR)

# The mixin's generator builds the boards with grafana-foundation-sdk (the venv's `dashboards`
# extra, as dashboards/generate.py does): it runs on the venv's Python, which dist-venv makes.
MIXIN_PYTHON ?= .venv/bin/python

dist-mixin: dist-setup
	$(MIXIN_PYTHON) mixin/generate.py --check
	mkdir -p $(DIST_DIR)
	tar -czf $(DIST_DIR)/storpath-mixin-$(DIST_VERSION).tar.gz --sort=name --owner=0 --group=0 \
	    --exclude=__pycache__ mixin

dist-sums:
	cd $(DIST_DIR) && rm -f SHA256SUMS && sha256sum -- * >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS

mixin: dist-venv
	$(MIXIN_PYTHON) mixin/generate.py

# The chart carries rules/*.yml and dashboards/*.json (Helm reads files inside the chart only).
chart-files:
	rm -rf deploy/helm/storpath/files && mkdir -p deploy/helm/storpath/files/rules deploy/helm/storpath/files/dashboards
	cp rules/*.yml deploy/helm/storpath/files/rules/
	cp dashboards/*.json deploy/helm/storpath/files/dashboards/
