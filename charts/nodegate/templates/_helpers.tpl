{{/*
Names and labels, as `helm create` makes them. The objects are named after the release
(`nodegate.fullname`); the app.kubernetes.io/name label is nodegate's own ("nodegate-reconciler",
what `nodegate manifests` writes too), so the Deployment's selector stays what it was.
*/}}

{{/* The app name label: nameOverride, else nodegate-reconciler. */}}
{{- define "nodegate.name" -}}
{{- default "nodegate-reconciler" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The objects' name: fullnameOverride, else the release name when it holds the chart name
(`helm install nodegate ...` gives "nodegate"), else "<release>-<chart or nameOverride>".
Cluster-scoped objects (ClusterRole, webhook configuration, fence policy) carry it too, so two
releases in one cluster need different release names.
*/}}
{{- define "nodegate.fullname" -}}
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

{{/* The helm.sh/chart label. */}}
{{- define "nodegate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The pods' selector: never changes over the release's life. */}}
{{- define "nodegate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodegate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Every object's labels. */}}
{{- define "nodegate.labels" -}}
helm.sh/chart: {{ include "nodegate.chart" . }}
{{ include "nodegate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nodegate
{{- end }}

{{/* The labels as a dict, for objects that merge in labels of their own. */}}
{{- define "nodegate.labelsDict" -}}
{{- include "nodegate.labels" . | fromYaml | toJson }}
{{- end }}

{{/* The ServiceAccount the pods run as. */}}
{{- define "nodegate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "nodegate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name the existing ServiceAccount the reconciler runs as (serviceAccount.create is false)" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image reference, as `nodegate manifests` writes it: repository, then the tag (default: the
chart's appVersion, the tag `make image` builds) unless only a digest pins it, then the digest.
*/}}
{{- define "nodegate.image" -}}
{{- $repository := required "image.repository: where you pushed the nodegate image, e.g. --set image.repository=iad.ocir.io/<tenancy>/nodegate (there is no public image; README, Install)" .Values.image.repository }}
{{- $tag := toString (.Values.image.tag | default "") }}
{{- if and (not $tag) (not .Values.image.digest) }}{{ $tag = .Chart.AppVersion }}{{ end }}
{{- $repository }}{{ if $tag }}:{{ $tag }}{{ end }}{{ if .Values.image.digest }}@{{ .Values.image.digest }}{{ end }}
{{- end }}

{{/* The image pull secrets' names: `imagePullSecrets` entries are names or {name: ...}. */}}
{{- define "nodegate.imagePullSecrets" -}}
{{- $names := list }}
{{- range .Values.imagePullSecrets }}
{{- if kindIs "map" . }}{{ $names = append $names .name }}{{ else }}{{ $names = append $names . }}{{ end }}
{{- end }}
{{- toJson $names }}
{{- end }}

{{/* The name of the fence policy and its binding. */}}
{{- define "nodegate.fenceName" -}}
{{- printf "%s-fence" (include "nodegate.fullname" .) }}
{{- end }}

{{/* The webhook's Service (and cert-manager Certificate) name. */}}
{{- define "nodegate.webhookService" -}}
{{- printf "%s-webhook" (include "nodegate.fullname" .) }}
{{- end }}

{{/* The webhook's TLS Secret. */}}
{{- define "nodegate.webhookSecret" -}}
{{- printf "%s-webhook-tls" (include "nodegate.fullname" .) }}
{{- end }}

{{/*
One NodeRules object from a value: {"name": ..., "spec": ...} as JSON. A value is a NodeRules
object (metadata.name and spec) as text or as a map, or, for `rules` only, the shape before
objects (the rules beside apiVersion and kind), named `fallback`, as `nodegate manifests`'s
rules_object names it. Called with (dict "value" V "where" "rules" "fallback" NAME).
*/}}
{{- define "nodegate.rulesObject" -}}
{{- $rules := .value }}
{{- $where := .where }}
{{- if kindIs "string" $rules }}
{{- $rules = fromYaml $rules }}
{{- if hasKey $rules "Error" }}
{{- fail (printf "%s: the text is no YAML mapping of a NodeRules object: %v" $where (get $rules "Error")) }}
{{- end }}
{{- end }}
{{- if not (kindIs "map" $rules) }}
{{- fail (printf "%s: a NodeRules object is a mapping (metadata: {name: ...}, spec: {...})" $where) }}
{{- end }}
{{- if or (hasKey $rules "spec") (hasKey $rules "metadata") (not .fallback) }}
{{- range $key, $_ := $rules }}
{{- if not (has $key (list "apiVersion" "kind" "metadata" "spec" "status")) }}
{{- fail (printf "%s: %v is no field of a NodeRules object (apiVersion, kind, metadata, spec, status): the rules go under spec" $where $key) }}
{{- end }}
{{- end }}
{{- $metadata := get $rules "metadata" | default dict }}
{{- $name := "" }}
{{- if kindIs "map" $metadata }}{{ $name = get $metadata "name" }}{{ end }}
{{- if not $name }}
{{- fail (printf "%s: the NodeRules object has no name: metadata: {name: NAME}, a DNS subdomain such as team-gpu" $where) }}
{{- end }}
{{- toJson (dict "name" $name "spec" (get $rules "spec" | default dict)) }}
{{- else }}
{{- /* The shape before objects: the rules beside apiVersion and kind. */}}
{{- toJson (dict "name" .fallback "spec" (omit $rules "apiVersion" "kind")) }}
{{- end }}
{{- end }}

{{/* Every NodeRules object the values give (`rules`, then `nodeRules`), as a JSON list. */}}
{{- define "nodegate.rulesObjects" -}}
{{- $objects := list }}
{{- if not (kindIs "invalid" .Values.rules) }}
{{- $objects = append $objects (include "nodegate.rulesObject" (dict "value" .Values.rules "where" "rules" "fallback" (include "nodegate.fullname" .)) | fromJson) }}
{{- end }}
{{- range $i, $value := .Values.nodeRules }}
{{- $objects = append $objects (include "nodegate.rulesObject" (dict "value" $value "where" (printf "nodeRules[%d]" $i) "fallback" "") | fromJson) }}
{{- end }}
{{- toJson $objects }}
{{- end }}

{{/*
The pods' tolerations (nodegate.manifests.tolerations.pod_tolerations): first every gate of the
rules the values give (a startup gate's taint and its formerKeys, a node agent's taint; key and
effect, any value), so the reconciler runs on the nodes it must ungate whatever their effect,
then `tolerations`, minus repeats. NodeRules objects applied with kubectl are not seen here:
tolerate their gates with `tolerations`.
*/}}
{{- define "nodegate.tolerations" -}}
{{- $listed := list }}
{{- range $object := include "nodegate.rulesObjects" . | fromJsonArray }}
{{- $spec := get $object "spec" | default dict }}
{{- range $kind := list "startupGates" "nodeAgents" }}
{{- range $rule := (get $spec $kind | default list) }}
{{- $taint := get $rule "taint" | default dict }}
{{- $keys := prepend (get $rule "formerKeys" | default list) (get $taint "key") }}
{{- range $key := $keys }}
{{- $entry := dict "key" $key "operator" "Exists" "effect" (get $taint "effect") }}
{{- if not (has $entry $listed) }}{{ $listed = append $listed $entry }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- range $given := .Values.tolerations }}
{{- $entry := merge (deepCopy $given) (dict "operator" "Equal") }}
{{- if not (has $entry $listed) }}{{ $listed = append $listed $entry }}{{ end }}
{{- end }}
{{- /* Gates of objects applied later: every NoExecute taint for a while, last. */}}
{{- if not (kindIs "invalid" .Values.unknownGateSeconds) }}
{{- $entry := dict "operator" "Exists" "effect" "NoExecute" "tolerationSeconds" (.Values.unknownGateSeconds | int) }}
{{- if not (has $entry $listed) }}{{ $listed = append $listed $entry }}{{ end }}
{{- end }}
{{- toJson $listed }}
{{- end }}
