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
