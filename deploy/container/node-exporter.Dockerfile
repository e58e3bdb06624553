# node_exporter from Debian bookworm's package.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive
RUN printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \
 && apt-get update \
 && apt-get install -y --no-install-recommends prometheus-node-exporter \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log \
        /usr/share/doc/* /usr/share/man/*
USER prometheus
EXPOSE 9100
ENTRYPOINT ["/usr/bin/prometheus-node-exporter"]
