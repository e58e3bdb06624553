# The example machines shipped in the package (storpath --example NAME), made from the fixture
# machines (included by the top-level Makefile); tests/unit/test_examples.py checks they are current.
#   make examples      rewrite exporter/storpath/examples/*.tar.gz
.PHONY: examples
examples:
	$(PY) -m tests.fixtures.examples

# The README's pictures (docs/images/), from an example machine and docs/performance.md's figures.
.PHONY: pictures
pictures:
	scripts/make-images
