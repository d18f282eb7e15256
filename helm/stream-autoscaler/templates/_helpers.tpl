{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "stream-autoscaler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name; the release name alone when it already contains the chart name. */}}
{{- define "stream-autoscaler.fullname" -}}
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

{{- define "stream-autoscaler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "stream-autoscaler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "stream-autoscaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "stream-autoscaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "stream-autoscaler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "stream-autoscaler.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* rbac.scope=namespaced: the one namespace the controller watches (controller.watchNamespace,
else the only jobNamespaces entry, else defaultJobNamespace). */}}
{{- define "stream-autoscaler.watchNamespace" -}}
{{- if .Values.controller.watchNamespace }}{{ .Values.controller.watchNamespace }}
{{- else if eq (len .Values.jobNamespaces) 1 }}{{ first .Values.jobNamespaces }}
{{- else }}{{ .Values.defaultJobNamespace }}{{ end }}
{{- end }}

{{/* The RBAC scope, checked: a ClusterRole for a controller that watches one namespace would
grant every namespace; a namespaced controller watches exactly one. */}}
{{- define "stream-autoscaler.rbacScope" -}}
{{- $scope := .Values.rbac.scope | default "cluster" }}
{{- if and (eq $scope "cluster") .Values.controller.watchNamespace }}
{{- fail "controller.watchNamespace needs rbac.scope=namespaced (a ClusterRole would grant every namespace)" }}
{{- end }}
{{- if eq $scope "namespaced" }}
{{- $ns := include "stream-autoscaler.watchNamespace" . }}
{{- range .Values.jobNamespaces }}
{{- if ne . $ns }}
{{- fail (printf "rbac.scope=namespaced watches one namespace (%s); jobNamespaces lists %s: install one release per namespace" $ns .) }}
{{- end }}
{{- end }}
{{- end }}
{{- $scope }}
{{- end }}

{{/* Namespaces where StreamJobs run: policies and Spark driver RBAC go there. Never the
release namespace: a driver runs its job author's code, and a pod there may name the
controller's ServiceAccount (docs/security.md, tests/integration/k8s/test_helm.py). */}}
{{- define "stream-autoscaler.jobNamespaces" -}}
{{- $list := list .Values.defaultJobNamespace }}
{{- if eq (include "stream-autoscaler.rbacScope" .) "namespaced" }}{{ $list = list (include "stream-autoscaler.watchNamespace" .) }}
{{- else if .Values.jobNamespaces }}{{ $list = .Values.jobNamespaces }}{{ end }}
{{- range $list }}
{{- if eq . $.Release.Namespace }}
{{- fail (printf "StreamJobs never run in the release namespace %s: a driver runs its job's code, and there it could start a pod as the controller's ServiceAccount; set jobNamespaces (or controller.watchNamespace) to another namespace (docs/security.md)" .) }}
{{- end }}
{{- end }}
{{- join "," $list }}
{{- end }}

{{/* Who may reach a driver's control and metrics ports (the drivers' NetworkPolicy, built by
the controller): this release's controller pods unless networkPolicy.driverControlFrom is set. */}}
{{- define "stream-autoscaler.driverControlFrom" -}}
{{- if kindIs "slice" .Values.networkPolicy.driverControlFrom }}
{{- toJson .Values.networkPolicy.driverControlFrom }}
{{- else }}
{{- $pods := dict "app.kubernetes.io/name" (include "stream-autoscaler.name" .) "app.kubernetes.io/instance" .Release.Name "app.kubernetes.io/component" "controller" }}
{{- $peer := dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" .Release.Namespace)) "podSelector" (dict "matchLabels" $pods) }}
{{- toJson (list $peer) }}
{{- end }}
{{- end }}

{{- define "stream-autoscaler.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}
