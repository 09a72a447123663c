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
{{- /* The Lease and the resnapshot signals ConfigMap (<name>-signals) live in the
release's namespace, named like the release, with or without leader election. */ -}}
{{- $_ := set $owned "leaderElection" (dict "enabled" (.Values.leaderElection.enabled | default false) "namespace" .Release.Namespace "name" (include "kube-cdc.fullname" .)) -}}
{{- if .Values.audit.enabled -}}
{{- /* The receiver's files are the audit Secret's, mounted at /etc/kube-cdc/audit. */ -}}
{{- $_ := set $owned "audit" (dict "webhook" (dict "listen" (printf ":%v" .Values.audit.port) "tlsCertFile" "/etc/kube-cdc/audit/tls.crt" "tlsKeyFile" "/etc/kube-cdc/audit/tls.key" "tokenFile" "/etc/kube-cdc/audit/token")) -}}
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
kube-cdc.builtinResources is what the chart knows about built-in resources, to turn a bare
name into RBAC without asking an apiserver: each plural's API group(s), whether it is
cluster-scoped, and the other names kube-cdc resolves to it (the lower-cased kind, which is
also the singular, and kubectl's short names). A name in no group and not in this table
fails the render: guessing the core group would grant the wrong thing. "events" is served
by both the core group and events.k8s.io (the same objects); both are granted.
*/}}
{{- define "kube-cdc.builtinResources" -}}
# core
pods: {groups: [""], aliases: [pod, po]}
services: {groups: [""], aliases: [service, svc]}
configmaps: {groups: [""], aliases: [configmap, cm]}
secrets: {groups: [""], aliases: [secret]}
namespaces: {groups: [""], aliases: [namespace, ns], clusterScoped: true}
nodes: {groups: [""], aliases: [node, "no"], clusterScoped: true}
persistentvolumes: {groups: [""], aliases: [persistentvolume, pv], clusterScoped: true}
persistentvolumeclaims: {groups: [""], aliases: [persistentvolumeclaim, pvc]}
serviceaccounts: {groups: [""], aliases: [serviceaccount, sa]}
endpoints: {groups: [""], aliases: [ep]}
limitranges: {groups: [""], aliases: [limitrange, limits]}
resourcequotas: {groups: [""], aliases: [resourcequota, quota]}
replicationcontrollers: {groups: [""], aliases: [replicationcontroller, rc]}
podtemplates: {groups: [""], aliases: [podtemplate]}
events: {groups: ["", events.k8s.io], aliases: [event, ev]}
# apps
deployments: {groups: [apps], aliases: [deployment, deploy]}
statefulsets: {groups: [apps], aliases: [statefulset, sts]}
daemonsets: {groups: [apps], aliases: [daemonset, ds]}
replicasets: {groups: [apps], aliases: [replicaset, rs]}
controllerrevisions: {groups: [apps], aliases: [controllerrevision]}
# batch
jobs: {groups: [batch], aliases: [job]}
cronjobs: {groups: [batch], aliases: [cronjob, cj]}
# networking.k8s.io
ingresses: {groups: [networking.k8s.io], aliases: [ingress, ing]}
ingressclasses: {groups: [networking.k8s.io], aliases: [ingressclass], clusterScoped: true}
networkpolicies: {groups: [networking.k8s.io], aliases: [networkpolicy, netpol]}
ipaddresses: {groups: [networking.k8s.io], aliases: [ipaddress, ip], clusterScoped: true}
servicecidrs: {groups: [networking.k8s.io], aliases: [servicecidr], clusterScoped: true}
# the rest
horizontalpodautoscalers: {groups: [autoscaling], aliases: [horizontalpodautoscaler, hpa]}
poddisruptionbudgets: {groups: [policy], aliases: [poddisruptionbudget, pdb]}
roles: {groups: [rbac.authorization.k8s.io], aliases: [role]}
rolebindings: {groups: [rbac.authorization.k8s.io], aliases: [rolebinding]}
clusterroles: {groups: [rbac.authorization.k8s.io], aliases: [clusterrole], clusterScoped: true}
clusterrolebindings: {groups: [rbac.authorization.k8s.io], aliases: [clusterrolebinding], clusterScoped: true}
storageclasses: {groups: [storage.k8s.io], aliases: [storageclass, sc], clusterScoped: true}
csidrivers: {groups: [storage.k8s.io], aliases: [csidriver], clusterScoped: true}
csinodes: {groups: [storage.k8s.io], aliases: [csinode], clusterScoped: true}
csistoragecapacities: {groups: [storage.k8s.io], aliases: [csistoragecapacity]}
volumeattachments: {groups: [storage.k8s.io], aliases: [volumeattachment], clusterScoped: true}
volumeattributesclasses: {groups: [storage.k8s.io], aliases: [volumeattributesclass, vac], clusterScoped: true}
leases: {groups: [coordination.k8s.io], aliases: [lease]}
endpointslices: {groups: [discovery.k8s.io], aliases: [endpointslice]}
customresourcedefinitions: {groups: [apiextensions.k8s.io], aliases: [customresourcedefinition, crd, crds], clusterScoped: true}
apiservices: {groups: [apiregistration.k8s.io], aliases: [apiservice], clusterScoped: true}
priorityclasses: {groups: [scheduling.k8s.io], aliases: [priorityclass, pc], clusterScoped: true}
runtimeclasses: {groups: [node.k8s.io], aliases: [runtimeclass], clusterScoped: true}
certificatesigningrequests: {groups: [certificates.k8s.io], aliases: [certificatesigningrequest, csr], clusterScoped: true}
mutatingwebhookconfigurations: {groups: [admissionregistration.k8s.io], aliases: [mutatingwebhookconfiguration], clusterScoped: true}
validatingwebhookconfigurations: {groups: [admissionregistration.k8s.io], aliases: [validatingwebhookconfiguration], clusterScoped: true}
validatingadmissionpolicies: {groups: [admissionregistration.k8s.io], aliases: [validatingadmissionpolicy], clusterScoped: true}
validatingadmissionpolicybindings: {groups: [admissionregistration.k8s.io], aliases: [validatingadmissionpolicybinding], clusterScoped: true}
flowschemas: {groups: [flowcontrol.apiserver.k8s.io], aliases: [flowschema], clusterScoped: true}
prioritylevelconfigurations: {groups: [flowcontrol.apiserver.k8s.io], aliases: [prioritylevelconfiguration], clusterScoped: true}
{{- end -}}

{{/*
kube-cdc.rbac decides what each configured resource is granted, as YAML:
  cluster:    [{group, resource}]            ClusterRole rules (resources in all namespaces)
  namespaced: {namespace: [{group, resource}]} one Role per namespace
  resources:  how many distinct resources are streamed
Names: "deployments.apps" → group apps; "example.com/v1/widgets" → group example.com;
"v1/configmaps" → the core group; a bare plural, kind or short name ("configmaps",
"ConfigMap", "cm") → its group from kube-cdc.builtinResources, else the render fails. A
resource with namespaces is granted in those namespaces only (kube-cdc lists and watches it
there), unless another entry streams it from all namespaces. A resource named twice gets
one rule.
*/}}
{{- define "kube-cdc.rbac" -}}
{{- $entries := list -}}
{{- if hasKey (default (dict) .Values.config) "resources" -}}
{{- $entries = .Values.config.resources -}}
{{- if not $entries -}}
{{- fail "config.resources is empty: remove the key to stream kube-cdc's default set, or list resources" -}}
{{- end -}}
{{- else -}}
{{- range include "kube-cdc.defaultResources" . | fromYamlArray -}}
{{- $entries = append $entries (dict "name" .) -}}
{{- end -}}
{{- end -}}
{{- $builtin := include "kube-cdc.builtinResources" . | fromYaml -}}
{{- $byAlias := dict -}}
{{- range $plural, $b := $builtin -}}
{{- $_ := set $byAlias $plural $plural -}}
{{- range $b.aliases -}}
{{- $_ := set $byAlias (toString .) $plural -}}
{{- end -}}
{{- end -}}
{{- $cluster := dict -}}
{{- $namespaced := dict -}}
{{- $distinct := dict -}}
{{- range $i, $e := $entries -}}
{{- if not (kindIs "map" $e) -}}
{{- fail (printf "config.resources[%d]: want a mapping like {name: %v}, got %v" $i $e $e) -}}
{{- end -}}
{{- $name := toString (default "" $e.name) -}}
{{- $n := lower (trim $name) -}}
{{- $where := printf "config.resources[%d] (%q)" $i $name -}}
{{- if not $n -}}
{{- fail (printf "config.resources[%d]: name is required" $i) -}}
{{- end -}}
{{- $groups := list -}}
{{- $resource := $n -}}
{{- $clusterScoped := false -}}
{{- if contains "/" $n -}}
{{- $parts := splitList "/" $n -}}
{{- if eq (len $parts) 3 -}}
{{- $groups = list (index $parts 0) -}}
{{- $resource = index $parts 2 -}}
{{- else if eq (len $parts) 2 -}}
{{- $groups = list "" -}}
{{- $resource = index $parts 1 -}}
{{- else -}}
{{- fail (printf "%s: want a plural, plural.group, version/resource or group/version/resource" $where) -}}
{{- end -}}
{{- else if contains "." $n -}}
{{- $parts := splitn "." 2 $n -}}
{{- $resource = $parts._0 -}}
{{- $groups = list $parts._1 -}}
{{- else if hasKey $byAlias $n -}}
{{- $resource = get $byAlias $n -}}
{{- $b := get $builtin $resource -}}
{{- $groups = $b.groups -}}
{{- $clusterScoped = default false $b.clusterScoped -}}
{{- else -}}
{{- fail (printf `%s: the chart cannot tell the API group of %q without an apiserver, so it cannot grant RBAC for it; write it as plural.group (e.g. "%s.example.com"), as version/resource ("v1/%s") for the core group, or as group/version/resource` $where $n $n $n) -}}
{{- end -}}
{{- if not $resource -}}
{{- fail (printf "%s: no resource in the name" $where) -}}
{{- end -}}
{{- if and $clusterScoped $e.namespaces -}}
{{- fail (printf "%s: %s is cluster-scoped; remove its namespaces" $where $resource) -}}
{{- end -}}
{{- $_ := set $distinct (printf "%s/%s" (first $groups) $resource) true -}}
{{- range $g := $groups -}}
{{- $key := printf "%s/%s" $g $resource -}}
{{- $rule := dict "group" $g "resource" $resource -}}
{{- if $e.namespaces -}}
{{- range $ns := $e.namespaces -}}
{{- $rules := dict -}}
{{- if hasKey $namespaced (toString $ns) -}}
{{- $rules = get $namespaced (toString $ns) -}}
{{- else -}}
{{- $_ := set $namespaced (toString $ns) $rules -}}
{{- end -}}
{{- $_ := set $rules $key $rule -}}
{{- end -}}
{{- else -}}
{{- $_ := set $cluster $key $rule -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $out := dict "cluster" (list) "namespaced" (dict) -}}
{{- range $key := keys $cluster | sortAlpha -}}
{{- $_ := set $out "cluster" (append $out.cluster (get $cluster $key)) -}}
{{- end -}}
{{- range $ns := keys $namespaced | sortAlpha -}}
{{- $rules := get $namespaced $ns -}}
{{- $list := list -}}
{{- range $key := keys $rules | sortAlpha -}}
{{- if not (hasKey $cluster $key) -}}
{{- $list = append $list (get $rules $key) -}}
{{- end -}}
{{- end -}}
{{- if $list -}}
{{- $_ := set $out.namespaced $ns $list -}}
{{- end -}}
{{- end -}}
{{- $_ := set $out "resources" (len $distinct) -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
kube-cdc.rules renders a list of {group, resource} as read-only rules: kube-cdc only lists
and watches (a LIST, then a WATCH from its resourceVersion); it never gets one object.
*/}}
{{- define "kube-cdc.rules" -}}
{{- range . }}
- apiGroups: [{{ .group | quote }}]
  resources: [{{ .resource | quote }}]
  verbs: ["list", "watch"]
{{- end -}}
{{- end -}}

{{/*
kube-cdc.digestKey decides where the pod's Secret digest key comes from, as YAML:
{name, key, create} (the Secret and its key for KUBE_CDC_TRANSFORMS__DIGESTKEY; create:
the chart makes that Secret), or {} when the chart wires no key. kube-cdc needs a key only
to stream core Secrets with transforms.redactSecrets on (config.NamesSecrets and
Transforms.validate); the RBAC helper already turns every name form into group/resource,
so the same reading decides both. The chart stays out of the way of a key the user
passes otherwise: digestKey.enabled false, KUBE_CDC_TRANSFORMS__DIGESTKEY in extraEnv, or
transforms.digestKeyFile (kube-cdc refuses digestKey and digestKeyFile together). A key
written into config would land in the ConfigMap, readable by whoever may read
ConfigMaps: the render fails instead.
*/}}
{{- define "kube-cdc.digestKey" -}}
{{- $transforms := default (dict) (default (dict) .Values.config).transforms -}}
{{- if $transforms.digestKey -}}
{{- fail "config.transforms.digestKey would put the Secret digest key into the ConfigMap: remove it, and let the chart keep the key in a Secret (digestKey.existingSecret for one of yours)" -}}
{{- end -}}
{{- $rbac := include "kube-cdc.rbac" . | fromYaml -}}
{{- $rules := $rbac.cluster -}}
{{- range $ns, $nsRules := $rbac.namespaced -}}
{{- $rules = concat $rules $nsRules -}}
{{- end -}}
{{- $secrets := false -}}
{{- range $rules -}}
{{- if and (eq .group "") (eq .resource "secrets") -}}
{{- $secrets = true -}}
{{- end -}}
{{- end -}}
{{- $redact := ne (toString (dig "redactSecrets" true $transforms)) "false" -}}
{{- $byUser := or (not .Values.digestKey.enabled) $transforms.digestKeyFile -}}
{{- range .Values.extraEnv -}}
{{- if eq (toString .name) "KUBE_CDC_TRANSFORMS__DIGESTKEY" -}}
{{- $byUser = true -}}
{{- end -}}
{{- end -}}
{{- if and $secrets $redact (not $byUser) -}}
{{- $key := required "digestKey.secretKey is required" .Values.digestKey.secretKey -}}
{{- with .Values.digestKey.existingSecret -}}
{{- toYaml (dict "name" . "key" $key "create" false) -}}
{{- else -}}
{{- toYaml (dict "name" (printf "%s-digest-key" (include "kube-cdc.fullname" .)) "key" $key "create" true) -}}
{{- end -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}
