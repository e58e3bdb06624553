# Alertmanager (and amtool) from Debian bookworm's package.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive
RUN printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \
 && apt-get update \
 && apt-get install -y --no-install-recommends prometheus-alertmanager \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log \
        /usr/share/doc/* /usr/share/man/* \
 && install -d -o prometheus -g prometheus /alertmanager
USER prometheus
WORKDIR /alertmanager
VOLUME ["/alertmanager"]
EXPOSE 9093
ENTRYPOINT ["/usr/bin/prometheus-alertmanager"]
# An empty cluster address turns off gossip: a single instance needs no peers.
CMD ["--config.file=/etc/prometheus/alertmanager.yml", "--storage.path=/alertmanager", "--cluster.listen-address="]
