{{- /* prometheus-operator's objects (ServiceMonitor, PodMonitor, PrometheusRule) need its API,
       monitoring.coreos.com/v1. Where the cluster does not serve it (no prometheus-operator CRDs),
       an install would fail on the first such object with "no matches for kind": fail before, saying
       what to set. `helm template` knows no cluster: give it the API with
       --api-versions monitoring.coreos.com/v1 (Argo CD passes the cluster's own). */}}
{{- define "storpath.requireOperator" -}}
{{- if not (.root.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") -}}
{{- fail (printf "%s is on, but this cluster does not serve monitoring.coreos.com/v1 (prometheus-operator's CRDs: ServiceMonitor, PodMonitor, PrometheusRule). Install prometheus-operator (kube-prometheus-stack) first, or --set serviceMonitor.enabled=false,prometheusRule.enabled=false (and podMonitor.enabled=false) to scrape storpath another way; for `helm template`, add --api-versions monitoring.coreos.com/v1" .what) -}}
{{- end -}}
{{- end -}}

{{- /* A monitor that scrapes over https must be able to verify storpath's certificate: otherwise
       Prometheus marks the target down (x509: certificate signed by unknown authority) and nothing
       says why. It can when webConfig.tlsSecret gives the CA (ca.crt) or the monitor's own
       tlsConfig says how (a CA, or insecureSkipVerify: true where that is accepted). */}}
{{- define "storpath.requireVerifiableTls" -}}
{{- $w := .root.Values.webConfig -}}
{{- $tls := and $w.enabled (or $w.existingSecret (hasKey ($w.content | default dict) "tls_server_config")) -}}
{{- if and $tls (not .monitor.tlsConfig) (not $w.tlsSecret) -}}
{{- fail (printf "webConfig serves https, but the %s could not verify storpath's certificate: set webConfig.tlsSecret (a kubernetes.io/tls Secret with ca.crt, e.g. cert-manager's; the monitors then trust its CA) or %s.tlsConfig (prometheus-operator's SafeTLSConfig: ca, serverName, or insecureSkipVerify: true)" .what .key) -}}
{{- end -}}
{{- end -}}
