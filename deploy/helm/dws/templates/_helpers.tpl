{{/*
Only what apps/deploy-check/src/render.ts implements may be used here (see
deploy/helm/dws/README.md, "Template subset"): the CI check renders this
chart without helm.
*/}}

{{/* Release-scoped base name, at most 63 characters minus room for "-webhook-dispatcher". */}}
{{- define "dws.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if eq .Release.Name $name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The Secret every service reads its secret environment from. */}}
{{- define "dws.secretName" -}}
{{- if .Values.secrets.existingSecret -}}
{{- .Values.secrets.existingSecret -}}
{{- else -}}
{{- include "dws.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* Labels shared by every object. */}}
{{- define "dws.labels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* Selector of one service's pods; called with (dict "root" $ "name" <service>). */}}
{{- define "dws.selectorLabels" -}}
app.kubernetes.io/name: {{ default .root.Chart.Name .root.Values.nameOverride | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/* Image reference; the tag defaults to the chart's appVersion. */}}
{{- define "dws.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
Refuses to render without a way to reach Postgres and NATS, and without a
sealing key: the services would otherwise start on a fixed development
sealing key (libs/config) or not start at all.
*/}}
{{- define "dws.checkValues" -}}
{{- if not .Values.secrets.existingSecret -}}
{{- $_ := required "secrets.sealKey is required (or name a Secret holding SERVICE_SEAL_KEY in secrets.existingSecret): the chart ships no default sealing key" .Values.secrets.sealKey -}}
{{- end -}}
{{- if not (or .Values.postgres.url .Values.postgres.existingSecret) -}}
{{- fail "postgres.url or postgres.existingSecret is required: every service needs DATABASE_URL when started on its own" -}}
{{- end -}}
{{- if and .Values.postgres.url .Values.secrets.existingSecret -}}
{{- fail "postgres.url is stored in the chart's Secret, which secrets.existingSecret replaces: put DATABASE_URL in that Secret and set postgres.existingSecret instead" -}}
{{- end -}}
{{- if not (or .Values.nats.url .Values.nats.existingSecret) -}}
{{- fail "nats.url or nats.existingSecret is required: every service needs NATS_URL when started on its own" -}}
{{- end -}}
{{- end -}}
