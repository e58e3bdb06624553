# The lab tier (included by the top-level Makefile): a real Linux kernel under QEMU (TCG)
# with emulated NVMe/PCIe/NUMA, SAS/SATA and md hardware. Needs qemu-system-x86 and
# mmdebstrap (scripts/apt-packages.txt); see tests/lab/lab.py.
#   make lab-build                    build or reuse the cached guest image
#                                     (STORPATH_LAB_CACHE, default ~/.cache/storpath-lab)
#   make lab                          boot the nvme topology, run the exporter, print /metrics
#   make lab LAB_TOPOLOGY=sas         ... another topology (nvme, sas, md)
#   make lab LAB_SHELL=1              boot and read shell commands from stdin instead
#   make lab-capture                  refresh tests/lab/captures/*.tar.gz from fresh guests
#   make test-lab                     the lab tests (pytest -m lab tests/lab)

LAB_PYTHON ?= $(or $(wildcard .venv/bin/python),python3)
LAB_TOPOLOGY ?= nvme
LAB_SHELL ?=

.PHONY: lab-build lab lab-capture test-lab

lab-build:
	$(LAB_PYTHON) tests/lab/lab.py build

lab: lab-build
	$(LAB_PYTHON) tests/lab/lab.py $(if $(LAB_SHELL),shell,metrics) $(LAB_TOPOLOGY)

lab-capture: lab-build
	for t in nvme sas md multipath; do $(LAB_PYTHON) tests/lab/lab.py capture $$t || exit 1; done

test-lab: lab-build
	$(LAB_PYTHON) -m pytest -m lab tests/lab
