{{/* Chart name. */}}
{{- define "triage-farm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name: <release>-<chart> unless the release name already holds the chart name. */}}
{{- define "triage-farm.fullname" -}}
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

{{- define "triage-farm.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Common labels. */}}
{{- define "triage-farm.labels" -}}
helm.sh/chart: {{ include "triage-farm.chart" . }}
{{ include "triage-farm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: triage-farm
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels (shared by every component; add app.kubernetes.io/component). */}}
{{- define "triage-farm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "triage-farm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "triage-farm.coordinatorName" -}}
{{- printf "%s-coordinator" (include "triage-farm.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* host:port of the coordinator's agent listener, as agents dial it. */}}
{{- define "triage-farm.coordinatorAddress" -}}
{{- printf "%s.%s.svc:%d" (include "triage-farm.coordinatorName" .) .Release.Namespace (int .Values.coordinator.ports.agent) }}
{{- end }}

{{- define "triage-farm.secretName" -}}
{{- default (printf "%s-secret" (include "triage-farm.fullname" .)) .Values.secret.existingSecret }}
{{- end }}

{{- define "triage-farm.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The tokens file: auth.tokens plus the agents' token (role agent) and, with weeklySweep, the
     weekly sweep's token (role operator). */}}
{{- define "triage-farm.tokensFile" -}}
{{- $tokens := list }}
{{- range .Values.auth.tokens }}
{{- $tokens = append $tokens (dict "name" .name "role" .role "token" .token) }}
{{- end }}
{{- if .Values.auth.agentToken }}
{{- $tokens = append $tokens (dict "name" "agents" "role" "agent" "token" .Values.auth.agentToken) }}
{{- end }}
{{- if and .Values.weeklySweep.enabled .Values.weeklySweep.operatorToken }}
{{- $tokens = append $tokens (dict "name" "weekly-sweep" "role" "operator" "token" .Values.weeklySweep.operatorToken) }}
{{- end }}
{{- toYaml (dict "tokens" $tokens) }}
{{- end }}

{{/* Name of the weekly-sweep CronJob. At most 52 characters: the controller appends
     "-<scheduled minute>" (11 characters) to name each Job, and a Job name is a DNS label. The
     fullname is shortened, not the suffix. */}}
{{- define "triage-farm.weeklySweepName" -}}
{{- printf "%s-weekly-sweep" (include "triage-farm.fullname" . | trunc 39 | trimSuffix "-") }}
{{- end }}
