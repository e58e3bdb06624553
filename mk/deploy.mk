# Deployment targets (included by the top-level Makefile).
#   make images            build the base image (cached) and the storpath/Prometheus/Alertmanager/node_exporter images
#   make test-integration  integration tests (STORPATH_IT_MODE=containers|processes, default containers)
#   make k8s-validate      regenerate-check and strictly validate the Kubernetes manifests offline
#   make compose-up        run the compose stack with the locally built images (compose-down stops it)
#   make docker-daemon     start the private Docker engine (scripts/docker-daemon)

DEPLOY_PYTHON ?= $(or $(wildcard .venv/bin/python),python3)
DEPLOY_DOCKER_HOST ?= unix://$(or $(STORPATH_DOCKER_ROOT),/var/lib/storpath-docker)/docker.sock
DEPLOY_K8S_VALIDATE := .cache/storpath-k8s-validate
# docker compose v2 plugin when present, else Debian's docker-compose (v1)
DEPLOY_COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
DEPLOY_COMPOSE_FILES := -f docker-compose.yml -f docker-compose.local.yml

.PHONY: images docker-daemon test-integration k8s-generate k8s-validate compose-up compose-down

docker-daemon:
	scripts/docker-daemon start

images:
	@if [ -z "$$DOCKER_HOST" ]; then eval "$$(scripts/docker-daemon start)"; fi; \
	deploy/container/build-base-images

test-integration:
	@if [ -z "$$DOCKER_HOST" ] && [ "$${STORPATH_IT_MODE:-containers}" = containers ]; then \
	    eval "$$(scripts/docker-daemon start)"; fi; \
	TESTCONTAINERS_RYUK_DISABLED=true TESTCONTAINERS_CONNECTION_MODE=docker_host \
	$(DEPLOY_PYTHON) -m pytest -m integration tests/integration

k8s-generate:
	deploy/kubernetes/generate

k8s-validate:
	deploy/kubernetes/validate/build >/dev/null
	deploy/kubernetes/generate --check
	$(DEPLOY_K8S_VALIDATE) kustomize deploy/kubernetes
	$(DEPLOY_K8S_VALIDATE) kustomize deploy/kubernetes/overlays/nvme-identify

compose-up: images
	cd deploy/compose && DOCKER_HOST=$${DOCKER_HOST:-$(DEPLOY_DOCKER_HOST)} $(DEPLOY_COMPOSE) $(DEPLOY_COMPOSE_FILES) up -d --no-build
	@echo "Prometheus http://127.0.0.1:$${PROMETHEUS_PORT:-9090}  Alertmanager http://127.0.0.1:$${ALERTMANAGER_PORT:-9093}  storpath http://127.0.0.1:$${STORPATH_PORT:-9866}/metrics"

compose-down:
	cd deploy/compose && DOCKER_HOST=$${DOCKER_HOST:-$(DEPLOY_DOCKER_HOST)} $(DEPLOY_COMPOSE) $(DEPLOY_COMPOSE_FILES) down --volumes
