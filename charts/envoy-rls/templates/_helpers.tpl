{{/* The chart's name, or nameOverride. */}}
{{- define "envoy-rls.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: fullnameOverride, or the release's name with the chart's unless it holds it. */}}
{{- define "envoy-rls.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "envoy-rls.selectorLabels" -}}
app.kubernetes.io/name: {{ include "envoy-rls.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "envoy-rls.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "envoy-rls.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "envoy-rls.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "envoy-rls.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The ConfigMap of the limits: the user's, or the chart's. */}}
{{- define "envoy-rls.configMapName" -}}
{{- default (include "envoy-rls.fullname" .) .Values.existingConfigMap }}
{{- end }}

{{/* The store: embedded, url, sentinel or cluster. */}}
{{- define "envoy-rls.store" -}}
{{- $r := .Values.redis }}
{{- $n := 0 }}
{{- $store := "embedded" }}
{{- if $r.url }}{{ $n = add1 $n }}{{ $store = "url" }}{{ end }}
{{- if or $r.sentinel.addrs $r.sentinel.master }}{{ $n = add1 $n }}{{ $store = "sentinel" }}{{ end }}
{{- if $r.cluster.addrs }}{{ $n = add1 $n }}{{ $store = "cluster" }}{{ end }}
{{- if gt $n 1 }}
{{- fail "redis: set one of redis.url, redis.sentinel and redis.cluster, not several" }}
{{- end }}
{{- if and (eq $store "sentinel") (not (and $r.sentinel.addrs $r.sentinel.master)) }}
{{- fail "redis.sentinel: set both addrs and master" }}
{{- end }}
{{- $store }}
{{- end }}

{{/* Refuses several pods on the embedded store unless the user accepts per-instance limits. */}}
{{- define "envoy-rls.checkReplicas" -}}
{{- if and (eq (include "envoy-rls.store" .) "embedded") (not .Values.acceptPerInstanceLimits) }}
{{- if gt (int .Values.replicaCount) 1 }}
{{- fail (printf "replicaCount is %d on the embedded store, where each pod counts on its own (a limit of N lets N per pod through): set redis.url, redis.sentinel or redis.cluster to share the counters, or acceptPerInstanceLimits=true" (int .Values.replicaCount)) }}
{{- end }}
{{- if .Values.autoscaling.enabled }}
{{- fail "autoscaling.enabled on the embedded store, where each pod counts on its own (a limit of N lets N per pod through): set redis.url, redis.sentinel or redis.cluster to share the counters, or acceptPerInstanceLimits=true" }}
{{- end }}
{{- end }}
{{- end }}
