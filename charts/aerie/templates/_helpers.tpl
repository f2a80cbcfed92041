{{/* Names, labels, images and the checks values.schema.json cannot express. */}}

{{- define "aerie.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object name: the release name, plus the chart name unless the release
name already holds it. Truncated so that "<fullname>-postgresql" still fits in 63 characters.
*/}}
{{- define "aerie.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 42 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 42 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 42 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "aerie.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "aerie.labels" -}}
helm.sh/chart: {{ include "aerie.chart" . }}
app.kubernetes.io/name: {{ include "aerie.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of the controller's pods. */}}
{{- define "aerie.controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aerie.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{/* Selector labels of the development PostgreSQL pod. */}}
{{- define "aerie.postgresql.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aerie.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: postgresql
{{- end }}

{{- define "aerie.controller.name" -}}
{{- printf "%s-controller" (include "aerie.fullname" .) }}
{{- end }}

{{- define "aerie.postgresql.name" -}}
{{- printf "%s-postgresql" (include "aerie.fullname" .) }}
{{- end }}

{{- define "aerie.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "aerie.controller.name" .) .Values.serviceAccount.name }}
{{- else }}
{{- .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
An image reference from {repository, tag, digest}: the digest wins over the tag, and an empty
tag means the chart's appVersion. Call with (dict "image" .Values.x.image "root" $).
*/}}
{{- define "aerie.image" -}}
{{- if .image.digest }}
{{- printf "%s@%s" .image.repository .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret whose DATABASE_URL the runners use. */}}
{{- define "aerie.databaseSecret" -}}
{{- if .Values.postgresql.enabled }}
{{- include "aerie.postgresql.name" . }}
{{- else }}
{{- .Values.database.existingSecret }}
{{- end }}
{{- end }}

{{/*
Checks across values, which values.schema.json cannot state with a message a person can act
on. Each failure names the values involved and the fix.
*/}}
{{- define "aerie.validate" -}}
{{- if and .Values.postgresql.enabled .Values.database.existingSecret }}
{{- fail (printf "\n\ndatabase.existingSecret (%q) and postgresql.enabled=true both choose the database: keep one of them (postgresql.enabled is for development only)." .Values.database.existingSecret) }}
{{- end }}
{{- if not (or .Values.postgresql.enabled .Values.database.existingSecret) }}
{{- fail "\n\naerie needs a PostgreSQL database: set database.existingSecret to the name of a Secret in the release namespace whose key DATABASE_URL holds a connection URL, or set postgresql.enabled=true for a single-instance development database." }}
{{- end }}
{{- if and (gt (int .Values.controller.replicas) 1) (not .Values.controller.leaderElection.enabled) }}
{{- fail (printf "\n\ncontroller.replicas is %d but controller.leaderElection.enabled is false: replicas would reconcile the same sessions at once. Enable leader election or run one replica." (int .Values.controller.replicas)) }}
{{- end }}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) }}
{{- fail "\n\nserviceAccount.create is false, so serviceAccount.name must name the existing ServiceAccount the controller runs as." }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) }}
{{- fail "\n\nmetrics.serviceMonitor.enabled needs metrics.enabled=true: the ServiceMonitor scrapes the metrics Service." }}
{{- end }}
{{- if and (or .Values.metrics.certSecret .Values.metrics.readers) (not (and .Values.metrics.enabled .Values.metrics.secure)) }}
{{- fail "\n\nmetrics.certSecret and metrics.readers need metrics.enabled=true and metrics.secure=true: only the secure endpoint serves a certificate and checks who may read it." }}
{{- end }}
{{- if and .Values.metrics.readers (not .Values.rbac.create) }}
{{- fail "\n\nmetrics.readers needs rbac.create=true: with rbac.create=false, bind the readers to a ClusterRole allowing GET on /metrics yourself." }}
{{- end }}
{{- if and .Values.metrics.enabled (eq (int .Values.metrics.port) (int .Values.controller.healthProbePort)) }}
{{- fail (printf "\n\nmetrics.port and controller.healthProbePort are both %d: the controller cannot serve both on one port." (int .Values.metrics.port)) }}
{{- end }}
{{- end }}

{{/*
The restricted Pod Security profile for a container: no privilege escalation, no
capabilities, a read-only root filesystem, non-root, the runtime's seccomp profile.
*/}}
{{- define "aerie.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}
