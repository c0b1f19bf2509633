{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "sluice.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels of every object: the manifests' app.kubernetes.io/part-of plus Helm's
standard labels.
*/}}
{{- define "sluice.labels" -}}
app.kubernetes.io/part-of: sluice
helm.sh/chart: {{ include "sluice.chart" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
Image tag: image.tag, else the chart's appVersion.
*/}}
{{- define "sluice.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{- define "sluice.schedulerImage" -}}
{{- printf "%s/sluice-scheduler:%s" (trimSuffix "/" .Values.image.registry) (include "sluice.tag" .) -}}
{{- end -}}

{{- define "sluice.overflowNodeImage" -}}
{{- printf "%s/sluice-overflow-node:%s" (trimSuffix "/" .Values.image.registry) (include "sluice.tag" .) -}}
{{- end -}}

{{/*
PriorityClass names: priorityClasses.prefix + the class's name.
*/}}
{{- define "sluice.researchPriorityClassName" -}}
{{- printf "%s%s" .Values.priorityClasses.prefix .Values.priorityClasses.research.name -}}
{{- end -}}

{{- define "sluice.productionPriorityClassName" -}}
{{- printf "%s%s" .Values.priorityClasses.prefix .Values.priorityClasses.production.name -}}
{{- end -}}

{{/*
"true" when any monitoring toggle is on: the metrics Services and the
Prometheus RBAC come with any of them.
*/}}
{{- define "sluice.monitoring" -}}
{{- $m := .Values.monitoring -}}
{{- if or $m.serviceMonitor.enabled $m.prometheusRule.enabled $m.dashboard.enabled -}}
true
{{- end -}}
{{- end -}}

{{/*
imagePullPolicy line, left out when image.pullPolicy is what Kubernetes
defaults to for the tag anyway (Always for :latest, else IfNotPresent), so
the default pods equal the manifests'.
*/}}
{{- define "sluice.imagePullPolicy" -}}
{{- $default := ternary "Always" "IfNotPresent" (eq (include "sluice.tag" .) "latest") -}}
{{- with .Values.image.pullPolicy -}}
{{- if ne . $default -}}
imagePullPolicy: {{ . }}
{{- end -}}
{{- end -}}
{{- end -}}
