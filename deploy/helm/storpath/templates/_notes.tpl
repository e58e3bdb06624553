{{- /* What `helm install` prints; a define, so that tests/packaging/test_chart.py can render it without a cluster. */}}
{{- define "storpath.notes" -}}
storpath {{ .Chart.AppVersion }} runs on every node as the DaemonSet {{ .Release.Namespace }}/{{ include "storpath.fullname" . }}.
The exporter container (uid 9866) holds no capability and is not privileged.
{{- if include "storpath.helper" . }}
The storpath-helper container holds the grants ({{ include "storpath.helperCapabilities" . }}, privileged for the node's
device nodes) and takes only its fixed commands on a socket the exporter alone may use (docs/raid-tools.md).
{{- else }}
NVMe Identify and SMART, dmsetup and the RAID tools are off (privileged, raidTools.enabled: a helper container).
{{- end }}
{{- $selector := .Values.prometheusSelectorLabels }}

Prometheus scrapes it with job="{{ include "storpath.job" . }}"
{{- if .Values.serviceMonitor.enabled }} (ServiceMonitor {{ include "storpath.fullname" . }}){{ end }}
{{- if .Values.podMonitor.enabled }} (PodMonitor {{ include "storpath.fullname" . }}){{ end }}
{{- if .Values.webConfig.enabled }} over https{{ end }}.
{{- if not (or .Values.serviceMonitor.enabled .Values.podMonitor.enabled) }}
WARNING: no ServiceMonitor or PodMonitor: nothing scrapes storpath and StorpathTargetAbsent fires.
{{- end }}
{{- if not $selector }}

WARNING: prometheusSelectorLabels is empty. kube-prometheus-stack's Prometheus selects monitors
and rules by `release: <its release name>`: without it, it loads none of storpath's alerts.
  --set prometheusSelectorLabels.release=<kube-prometheus-stack's release name>
{{- else }}
Monitors and rules carry {{ range $k, $val := $selector }}{{ $k }}={{ $val }} {{ end }}for Prometheus' selectors.
{{- end }}
{{- if .Values.prometheusRule.enabled }}
Alerts and recording rules: PrometheusRules {{ include "storpath.fullname" . }}-*.
{{- if and (not .Values.hostNetwork) (not .Values.prometheusRule.runbookUrl) }}
NOTE: the alerts' runbook links point at each node's name on port {{ .Values.port }}, where storpath answers
only with hostNetwork; set a base the operators' browsers reach (a wiki, a mirror of docs/runbooks/):
  --set prometheusRule.runbookUrl=https://wiki.example.org/storpath/runbooks/
{{- end }}
{{- end }}
{{- if .Values.dashboards.enabled }}
Dashboards: ConfigMaps labelled {{ .Values.dashboards.label }}={{ .Values.dashboards.labelValue }} for Grafana's sidecar
{{- with .Values.dashboards.namespace }} in namespace {{ . }}{{ end }}, folder "{{ .Values.dashboards.folder }}".
{{- end }}
{{- if .Values.webConfig.enabled }}
{{- if not (or .Values.serviceMonitor.tlsConfig .Values.webConfig.tlsSecret) }}

WARNING: webConfig is on but the monitors have no tlsConfig (set webConfig.tlsSecret or serviceMonitor.tlsConfig).
{{- end }}
{{- end }}

Check a node by hand:
  kubectl -n {{ .Release.Namespace }} port-forward ds/{{ include "storpath.fullname" . }} {{ .Values.port }}
  curl -s{{ if .Values.webConfig.enabled }}k https{{ else }} http{{ end }}://127.0.0.1:{{ .Values.port }}/metrics | grep storpath_build_info
{{- end -}}
