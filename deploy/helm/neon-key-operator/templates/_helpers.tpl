{{/* The chart name, overridable. */}}
{{- define "neon-key-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's objects: the release name when it already holds the chart name
(helm install neon-key-operator ...), otherwise <release>-<chart>. 63 characters: a DNS label.
*/}}
{{- define "neon-key-operator.fullname" -}}
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

{{- define "neon-key-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable for the life of the release (a Deployment's selector is immutable). */}}
{{- define "neon-key-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "neon-key-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The recommended labels (kubernetes.io/docs/concepts/overview/working-with-objects/common-labels). */}}
{{- define "neon-key-operator.labels" -}}
helm.sh/chart: {{ include "neon-key-operator.chart" . }}
{{ include "neon-key-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: neon-key-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "neon-key-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "neon-key-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "neon-key-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
The operator's rights over the resources it reconciles: the same rules as deploy/base/rbac.yaml
(test/deploy compares them), granted by a ClusterRole, or by a Role in each watched namespace.
Exactly the verbs the code calls (test/deploy/rbac-contract.ts names each call): no wildcard; no
create/delete of the custom resources (people create them, the operator reconciles them); the
resources written by UPDATE with a resourceVersion, never patched; the status merge-patched; the
finalizers subresource because the Secrets' owner references set blockOwnerDeletion; Secrets
because it writes the key Secrets and reads the credentials Secrets (RBAC cannot restrict by label;
the operator's informer lists and watches every Secret's metadata only, never its data, to wake the
resources whose credentials Secret changed, and reads a Secret's data by name);
core/v1 events, created only; apps workloads read, listed and patched (a pod template annotation)
to restart the consumers of a rotated key (spec.rotation.restart); the resource's Namespace read by
name (its labels, for an issuer's selector, and whether it is being deleted: a Role of namespace X
may grant GET of the Namespace X).
*/}}
{{- define "neon-key-operator.rules" -}}
- apiGroups: [keys.neon.dev]
  resources: [apikeys, projectapikeys]
  verbs: [get, list, watch, update]
- apiGroups: [keys.neon.dev]
  resources: [apikeys/status, projectapikeys/status]
  verbs: [update, patch]
- apiGroups: [keys.neon.dev]
  resources: [apikeyinventories]
  verbs: [get, list, watch]
- apiGroups: [keys.neon.dev]
  resources: [apikeyinventories/status]
  verbs: [patch]
- apiGroups: [keys.neon.dev]
  resources: [apikeys/finalizers, projectapikeys/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [get, list, patch]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get]
{{- end }}

{{- /*
ClusterKeyIssuers are cluster-scoped: their rules go in the ClusterRole of the every-namespace mode
(deploy/base/rbac.yaml says why each verb), or, with watchNamespaces, in a ClusterRole of their own
when issuerSecretsNamespace is set; otherwise the operator reads no issuer.
*/}}
{{- define "neon-key-operator.issuerRules" -}}
- apiGroups: [keys.neon.dev]
  resources: [clusterkeyissuers]
  verbs: [get, list, watch, update]
- apiGroups: [keys.neon.dev]
  resources: [clusterkeyissuers/status]
  verbs: [patch]
{{- end }}
