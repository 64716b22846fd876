{{/* The release's name prefix: the release name when it already holds the chart's name. */}}
{{- define "otlpgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 55 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 55 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 55 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "edge"). */}}
{{- define "otlpgate.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "otlpgate.labels" -}}
{{ include "otlpgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "otlpgate.image" -}}
{{- printf "%s:%s" (required "image.repository is required" .Values.image.repository) (required "image.tag is required" (toString .Values.image.tag)) -}}
{{- end -}}

{{/* One value of a -dest key, quoted when it holds a comma or starts with a quote. */}}
{{- define "otlpgate.destValue" -}}
{{- $s := toString . -}}
{{- if or (contains "," $s) (hasPrefix "\"" $s) -}}
{{- printf "\"%s\"" ($s | replace "\\" "\\\\" | replace "\"" "\\\"") -}}
{{- else -}}
{{- $s -}}
{{- end -}}
{{- end -}}

{{/* A -dest value from a string (as written) or a map of its keys; name comes first, a list
     repeats its key. */}}
{{- define "otlpgate.dest" -}}
{{- if kindIs "string" . -}}
{{- . -}}
{{- else -}}
{{- $parts := list (printf "name=%s" (include "otlpgate.destValue" (required "a destination needs a name" .name))) -}}
{{- range $k, $v := . -}}
{{- if ne $k "name" -}}
{{- if kindIs "slice" $v -}}
{{- range $v -}}
{{- $parts = append $parts (printf "%s=%s" $k (include "otlpgate.destValue" .)) -}}
{{- end -}}
{{- else -}}
{{- $parts = append $parts (printf "%s=%s" $k (include "otlpgate.destValue" $v)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}
{{- end -}}

{{/* The flags of the processing steps, tenants and destinations of one component, as args
     list items: (dict "root" $ "c" .Values.edge "dests" (list ...)). */}}
{{- define "otlpgate.commonArgs" -}}
{{- $p := .c.processing | default dict -}}
{{- range $k, $v := $p.resourceSet }}
- {{ printf "-resource.set=%s=%s" $k (toString $v) | quote }}
{{- end }}
{{- range $p.resourceDelete }}
- {{ printf "-resource.delete=%s" . | quote }}
{{- end }}
{{- range $p.drop }}
- {{ printf "-drop=%s" . | quote }}
{{- end }}
{{- with $p.sampleTraces }}
- {{ printf "-sample.traces=%s" (toString .) | quote }}
{{- end }}
{{- with .root.Values.tenants.headers }}
- {{ printf "-intake.headers=%s" (join "," .) | quote }}
{{- end }}
{{- with .root.Values.tenants.default }}
- {{ printf "-intake.headers.default=%s" . | quote }}
{{- end }}
{{- with .c.tenantRate }}
- {{ printf "-tenant.rate=%s" . | quote }}
{{- end }}
{{- with .c.tenantBurst }}
- {{ printf "-tenant.burst=%s" . | quote }}
{{- end }}
{{- range .dests }}
- {{ printf "-dest=%s" (include "otlpgate.dest" .) | quote }}
{{- end }}
{{- range .c.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{- define "otlpgate.scrapeAnnotations" -}}
{{- if .Values.metrics.scrapeAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: "8888"
prometheus.io/path: /metrics
{{- end }}
{{- end -}}
