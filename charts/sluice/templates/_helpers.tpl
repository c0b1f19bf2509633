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

{{- /*
sluice.selectorCEL: a LabelSelector (matchLabels, matchExpressions) as a CEL
expression over variables.nsLabels, the labels of the request's namespace.
An empty selector is "true", as a LabelSelector selects everything.
*/ -}}
{{- define "sluice.selectorCEL" -}}
{{- $terms := list -}}
{{- range $k, $v := (.matchLabels | default dict) -}}
{{- $terms = append $terms (printf "(%s in variables.nsLabels && variables.nsLabels[%s] == %s)" (toJson $k) (toJson $k) (toJson $v)) -}}
{{- end -}}
{{- range (.matchExpressions | default list) -}}
{{- $k := toJson .key -}}
{{- $values := list -}}
{{- range (.values | default list) -}}{{- $values = append $values (toJson .) -}}{{- end -}}
{{- if eq .operator "In" -}}
{{- $terms = append $terms (printf "(%s in variables.nsLabels && variables.nsLabels[%s] in [%s])" $k $k (join ", " $values)) -}}
{{- else if eq .operator "NotIn" -}}
{{- $terms = append $terms (printf "(!(%s in variables.nsLabels) || !(variables.nsLabels[%s] in [%s]))" $k $k (join ", " $values)) -}}
{{- else if eq .operator "Exists" -}}
{{- $terms = append $terms (printf "(%s in variables.nsLabels)" $k) -}}
{{- else if eq .operator "DoesNotExist" -}}
{{- $terms = append $terms (printf "!(%s in variables.nsLabels)" $k) -}}
{{- else -}}
{{- fail (printf "config.overflow: matchExpressions operator %q is not In, NotIn, Exists or DoesNotExist" .operator) -}}
{{- end -}}
{{- end -}}
{{- if $terms -}}{{ join " && " $terms }}{{- else -}}true{{- end -}}
{{- end -}}

{{- /*
sluice.claimWriters: the users that may write ResearchClaims, as CEL string
literals: the scheduler's ServiceAccount and admissionPolicy.claimWriters.
*/ -}}
{{- define "sluice.claimWriters" -}}
{{- $writers := list (toJson (printf "system:serviceaccount:%s:sluice-scheduler" .Release.Namespace)) -}}
{{- range .Values.admissionPolicy.claimWriters -}}{{- $writers = append $writers (toJson .) -}}{{- end -}}
{{- join ", " $writers -}}
{{- end -}}
