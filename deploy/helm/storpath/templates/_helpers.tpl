{{- define "storpath.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "storpath.fullname" -}}
{{- if contains (include "storpath.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "storpath.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "storpath.selectorLabels" -}}
app.kubernetes.io/name: {{ include "storpath.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "storpath.labels" -}}
{{ include "storpath.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "storpath.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "storpath.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- if .Values.probes }}{{ $_ := set $config "probes" .Values.probes }}{{ end -}}
{{- toYaml $config -}}
{{- end -}}

{{- define "storpath.webSecret" -}}
{{- .Values.webConfig.existingSecret | default (printf "%s-web-config" (include "storpath.fullname" .)) -}}
{{- end -}}

{{- /* Labels Prometheus selects by, with an object's own. */}}
{{- define "storpath.prometheusLabels" -}}
{{- $labels := merge (deepCopy (.own | default dict)) (deepCopy (.root.Values.prometheusSelectorLabels | default dict)) -}}
{{- with $labels }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{- /* The job the shipped rules select (target_selector of rules/config/thresholds.yml;
       tests/unit/test_chart_files.py keeps the two the same). */}}
{{- define "storpath.rulesJob" -}}storpath{{- end -}}

{{- /* An endpoint's scheme, tlsConfig and basicAuth from webConfig (or the monitor's own). */}}
{{- define "storpath.endpointAuth" -}}
{{- $v := .root.Values -}}
{{- if $v.webConfig.enabled }}
scheme: https
{{- if .monitor.tlsConfig }}
tlsConfig: {{- toYaml .monitor.tlsConfig | nindent 2 }}
{{- else if $v.webConfig.tlsSecret }}
tlsConfig:
  ca:
    secret:
      name: {{ $v.webConfig.tlsSecret }}
      key: ca.crt
  serverName: {{ $v.webConfig.serverName | default (printf "%s.%s.svc" (include "storpath.fullname" .root) .root.Release.Namespace) }}
{{- end }}
{{- if .monitor.basicAuth }}
basicAuth: {{- toYaml .monitor.basicAuth | nindent 2 }}
{{- else if $v.webConfig.basicAuthSecret }}
basicAuth:
  username:
    name: {{ $v.webConfig.basicAuthSecret }}
    key: username
  password:
    name: {{ $v.webConfig.basicAuthSecret }}
    key: password
{{- end }}
{{- end }}
{{- end -}}

{{- /* The Service's and the pods' labels: the chart's and the label the monitors take the job from. */}}
{{- define "storpath.targetLabels" -}}
{{ include "storpath.labels" . }}
jobLabel: {{ .Values.job | quote }}
{{- end -}}

{{- /* The job label Prometheus gives the targets: the jobLabel's value, else the Service's
       name (ServiceMonitor) or <namespace>/<name> (PodMonitor alone), as prometheus-operator does. */}}
{{- define "storpath.job" -}}
{{- $labels := include "storpath.targetLabels" . | fromYaml -}}
{{- $monitor := .Values.serviceMonitor -}}
{{- $fallback := include "storpath.fullname" . -}}
{{- if and (not .Values.serviceMonitor.enabled) .Values.podMonitor.enabled -}}
{{- $monitor = .Values.podMonitor -}}
{{- $fallback = printf "%s/%s" .Release.Namespace (include "storpath.fullname" .) -}}
{{- end -}}
{{- get $labels ($monitor.jobLabel | default "") | default $fallback -}}
{{- end -}}

{{- /* "true" when a source that needs a grant is on: then the pod has the storpath-helper container
       (the grants, the devices, the tools' folders) and the exporter asks it over its socket;
       "" otherwise (no helper: it could do nothing the exporter cannot). */}}
{{- define "storpath.helper" -}}
{{- if or .Values.privileged .Values.raidTools.enabled }}true{{ end -}}
{{- end -}}

{{- /* The helper's capabilities: CAP_SYS_ADMIN for every privileged source (NVMe admin commands,
       megaraid_sas' ioctl node, device-mapper's ioctls, PCI config space past 64 bytes),
       CAP_SYS_RAWIO only for the RAID tools (hpsa/smartpqi/aacraid passthrough). */}}
{{- define "storpath.helperCapabilities" -}}
SYS_ADMIN{{ if .Values.raidTools.enabled }}, SYS_RAWIO{{ end }}
{{- end -}}
