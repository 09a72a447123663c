{{- define "kube-cdc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kube-cdc.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kube-cdc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-cdc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kube-cdc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "kube-cdc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "kube-cdc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kube-cdc.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
kube-cdc.config is the config file: .Values.config with the keys the chart owns.
*/}}
{{- define "kube-cdc.config" -}}
{{- $owned := dict "metrics" (dict "address" (printf ":%v" .Values.metrics.port)) -}}
{{- if .Values.leaderElection.enabled -}}
{{- $_ := set $owned "leaderElection" (dict "enabled" true "namespace" .Release.Namespace "name" (include "kube-cdc.fullname" .)) -}}
{{- end -}}
{{- mustMergeOverwrite (deepCopy (default (dict) .Values.config)) $owned | toYaml -}}
{{- end -}}

{{/*
kube-cdc.defaultResources mirrors config.DefaultResources(): what kube-cdc streams when
config.resources is absent (a test keeps the two equal).
*/}}
{{- define "kube-cdc.defaultResources" -}}
- namespaces
- nodes
- pods
- services
- configmaps
- deployments.apps
- statefulsets.apps
- daemonsets.apps
- replicasets.apps
- jobs.batch
- cronjobs.batch
- ingresses.networking.k8s.io
{{- end -}}

{{/*
kube-cdc.rbacRules turns each configured resource name into one read-only rule:
"configmaps" → core group; "deployments.apps" → group apps; "example.com/v1/widgets" →
group example.com. A resource named twice (say, for two namespaces) gets one rule.
*/}}
{{- define "kube-cdc.rbacRules" -}}
{{- $names := list -}}
{{- if hasKey (default (dict) .Values.config) "resources" -}}
{{- range .Values.config.resources -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- else -}}
{{- $names = include "kube-cdc.defaultResources" . | fromYamlArray -}}
{{- end -}}
{{- $rules := dict -}}
{{- range $names -}}
{{- $n := lower (trim .) -}}
{{- $group := "" -}}
{{- $resource := $n -}}
{{- if contains "/" $n -}}
{{- $parts := splitList "/" $n -}}
{{- if ne (len $parts) 3 -}}
{{- fail (printf "config.resources: %q: want a plural, plural.group or group/version/resource" .) -}}
{{- end -}}
{{- $group = index $parts 0 -}}
{{- $resource = index $parts 2 -}}
{{- else if contains "." $n -}}
{{- $parts := splitn "." 2 $n -}}
{{- $resource = $parts._0 -}}
{{- $group = $parts._1 -}}
{{- end -}}
{{- $_ := set $rules (printf "%s/%s" $group $resource) (dict "group" $group "resource" $resource) -}}
{{- end -}}
{{- range $key := keys $rules | sortAlpha }}
{{- $r := get $rules $key }}
- apiGroups: [{{ $r.group | quote }}]
  resources: [{{ $r.resource | quote }}]
  verbs: ["get", "list", "watch"]
{{- end -}}
{{- end -}}
