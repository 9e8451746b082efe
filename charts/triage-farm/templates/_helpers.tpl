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

{{/* Fills in what the chart's Secret needs and the values leave out, once per render (the
     result is kept in .Values, so every include of secret.yaml sees the same material):
     - with TLS on and no tls.cert/tls.key: the Secret already in the cluster (an upgrade) keeps
       its certificates; otherwise a CA (<fullname>-ca) and a coordinator certificate for the
       coordinator Service's names are generated, and with tls.mutual an agent client
       certificate from the same CA. The CA's key is not kept: switching tls.mutual on later
       generates a new CA.
     - without auth.insecure and no auth.agentToken: the existing Secret's agent-token, or 40
       random characters.
     `helm template` has no cluster (lookup returns nothing), so it always generates. */}}
{{- define "triage-farm.ensureSecretMaterial" -}}
{{- if not .Values.secret.existingSecret }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "triage-farm.secretName" .) }}
{{- $data := (and $existing $existing.data) | default dict }}
{{- if and .Values.tls.enabled (not (and .Values.tls.cert .Values.tls.key)) }}
{{- $kept := and (index $data "tls.crt") (index $data "tls.key") (index $data "ca.crt") }}
{{- if and $kept .Values.tls.mutual }}
{{- $kept = and (index $data "agent.crt") (index $data "agent.key") }}
{{- end }}
{{- if $kept }}
{{- $_ := set .Values.tls "cert" (index $data "tls.crt" | b64dec) }}
{{- $_ := set .Values.tls "key" (index $data "tls.key" | b64dec) }}
{{- $_ := set .Values.tls "ca" (index $data "ca.crt" | b64dec) }}
{{- if .Values.tls.mutual }}
{{- $_ := set .Values.tls "agentCert" (index $data "agent.crt" | b64dec) }}
{{- $_ := set .Values.tls "agentKey" (index $data "agent.key" | b64dec) }}
{{- end }}
{{- else }}
{{- $svc := include "triage-farm.coordinatorName" . }}
{{- $ns := .Release.Namespace }}
{{- $ca := genCA (printf "%s-ca" (include "triage-farm.fullname" .)) 3650 }}
{{- $names := concat (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) (.Values.tls.extraDnsNames | default list) }}
{{- $server := genSignedCert $svc (.Values.tls.extraIpAddresses | default list) $names 3650 $ca }}
{{- $_ := set .Values.tls "cert" $server.Cert }}
{{- $_ := set .Values.tls "key" $server.Key }}
{{- $_ := set .Values.tls "ca" $ca.Cert }}
{{- if and .Values.tls.mutual (not (and .Values.tls.agentCert .Values.tls.agentKey)) }}
{{- $agent := genSignedCert (printf "%s-agent" (include "triage-farm.fullname" .)) nil nil 3650 $ca }}
{{- $_ := set .Values.tls "agentCert" $agent.Cert }}
{{- $_ := set .Values.tls "agentKey" $agent.Key }}
{{- end }}
{{- end }}
{{- end }}
{{- if and (not .Values.auth.insecure) (not .Values.auth.agentToken) }}
{{- $token := index $data "agent-token" }}
{{- if $token }}
{{- $_ := set .Values.auth "agentToken" ($token | b64dec) }}
{{- else }}
{{- $_ := set .Values.auth "agentToken" (randAlphaNum 40) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
