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
Cluster-scoped objects (ClusterRole, webhook configuration, fence policy) carry it too. One
release per cluster all the same: the reconciler reads every NodeRules object of the cluster.
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
{{- $tag := .Values.image.tag | default "" }}
{{- if not (kindIs "string" $tag) }}
{{- /* A number in a values file (tag: 20240101) is a float to helm: its digits, or refused. */}}
{{- if ne (float64 $tag) (float64 (int64 $tag)) }}
{{- fail (printf "image.tag: %v is a number with a fraction, which YAML does not keep as written (1.10 reads as 1.1): quote image.tag, e.g. tag: \"%v\"" $tag $tag) }}
{{- end }}
{{- $tag = printf "%d" (int64 $tag) }}
{{- end }}
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

{{/*
A name of the release's with a suffix ("-metrics"), within the limit of its object's names: the
objects' name cut to leave room for the suffix when the whole would pass the limit. A Service's
name is a DNS-1035 label, at most 63 characters (the webhook's cert-manager Certificate has the
webhook Service's name); a Secret's, a ValidatingAdmissionPolicy's, a ConfigMap's is a DNS
subdomain, at most 253, which the objects' name (at most 63) and a suffix always fit. The builder
writes `settings.name` + suffix: the same name whenever the whole fits. Called with
(list . "-suffix" LIMIT).
*/}}
{{- define "nodegate.suffixedName" -}}
{{- $suffix := index . 1 }}
{{- $room := int (sub (index . 2) (len $suffix)) }}
{{- printf "%s%s" (include "nodegate.fullname" (index . 0) | trunc $room | trimSuffix "-") $suffix }}
{{- end }}

{{/* The metrics Service: at most 63 characters. */}}
{{- define "nodegate.metricsService" -}}
{{- include "nodegate.suffixedName" (list . "-metrics" 63) }}
{{- end }}

{{/* The webhook's Service (and cert-manager Certificate) name: at most 63 characters. */}}
{{- define "nodegate.webhookService" -}}
{{- include "nodegate.suffixedName" (list . "-webhook" 63) }}
{{- end }}

{{/* The name of the fence policy and its binding. */}}
{{- define "nodegate.fenceName" -}}
{{- include "nodegate.suffixedName" (list . "-fence" 253) }}
{{- end }}

{{/* The webhook's TLS Secret. */}}
{{- define "nodegate.webhookSecret" -}}
{{- include "nodegate.suffixedName" (list . "-webhook-tls" 253) }}
{{- end }}

{{/* The Grafana dashboard's ConfigMap. */}}
{{- define "nodegate.dashboardName" -}}
{{- include "nodegate.suffixedName" (list . "-dashboard" 253) }}
{{- end }}

{{/*
An integer value as digits: helm reads the numbers of a values file as floats, which print in
exponent notation from a million on (1000000 gives 1e+06). Called with the number.
*/}}
{{- define "nodegate.integer" -}}
{{- printf "%d" (int64 .) }}
{{- end }}

{{/*
A quantity (resources) as Kubernetes writes it, a string: a number of a values file or of --set
as its digits (1 gives "1", 0.5 gives "0.5"), so the container's resources are what
`nodegate manifests` writes.
*/}}
{{- define "nodegate.quantity" -}}
{{- if kindIs "string" . }}{{ . }}
{{- else if eq (float64 .) (float64 (int64 .)) }}{{ printf "%d" (int64 .) }}
{{- else }}{{ toString . }}
{{- end }}
{{- end }}

{{/* The container's resources, quantities as strings, as JSON. */}}
{{- define "nodegate.resources" -}}
{{- $resources := dict }}
{{- range $kind, $quantities := .Values.resources }}
{{- $strings := dict }}
{{- range $resource, $quantity := $quantities }}
{{- if not (kindIs "invalid" $quantity) }}{{ $_ := set $strings $resource (include "nodegate.quantity" $quantity) }}{{ end }}
{{- end }}
{{- $_ := set $resources $kind $strings }}
{{- end }}
{{- toJson $resources }}
{{- end }}

{{/*
One NodeRules object from a value: {"name": ..., "spec": ...} as JSON. A value is a NodeRules
object (metadata.name and spec) as text or as a map, or, for `rules` only, the shape before
objects (the rules beside apiVersion and kind), named `fallback`, as `nodegate manifests`'s
rules_object names it. Called with (dict "value" V "where" "rules" "fallback" NAME).
The text holds one YAML document: fromYaml would read the first of several and drop the others
without a word, so the documents are counted first (a line `---` starts one; blank lines,
comments, `...` and directives are no document's content).
*/}}
{{- define "nodegate.rulesObject" -}}
{{- $rules := .value }}
{{- $where := .where }}
{{- if kindIs "string" $rules }}
{{- $documents := 0 }}
{{- range $text := regexSplit "(?m)^---(?:[ \t]|$)" $rules -1 }}
{{- if regexReplaceAll "(?m)^(?:[ \t]*(?:#.*)?|\\.\\.\\.(?:[ \t].*)?|%.*)$" $text "" | trim }}{{ $documents = add1 $documents }}{{ end }}
{{- end }}
{{- if gt $documents 1 }}
{{- fail (printf "%s: the text holds %d YAML documents (---), and the chart makes one NodeRules object of %s: give each further object in nodeRules (a list of maps), or keep one document in the file" $where $documents $where) }}
{{- end }}
{{- if eq $documents 0 }}
{{- fail (printf "%s: the text holds no NodeRules object (it is empty, or only comments): give one (metadata: {name: ...}, spec: {...}), or leave %s null to make none" $where $where) }}
{{- end }}
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
{{- toJson (dict "name" $name "spec" (get $rules "spec" | default dict) "where" $where) }}
{{- else }}
{{- /* The shape before objects: the rules beside apiVersion and kind. */}}
{{- $spec := omit $rules "apiVersion" "kind" }}
{{- if not $spec }}
{{- fail (printf "%s: the value holds no rules: no NodeRules object (metadata and spec), and nothing beside apiVersion and kind; give the rules, or leave %s null to make no object" $where $where) }}
{{- end }}
{{- toJson (dict "name" .fallback "spec" $spec "where" $where) }}
{{- end }}
{{- end }}

{{/*
Every NodeRules object the values give (`rules`, then `nodeRules`), as a JSON list; each name a
DNS subdomain (what the API server takes as a NodeRules object's name), none given twice (helm
would render two objects of one name: the second would replace the first).
*/}}
{{- define "nodegate.rulesObjects" -}}
{{- $objects := list }}
{{- if not (kindIs "invalid" .Values.rules) }}
{{- $objects = append $objects (include "nodegate.rulesObject" (dict "value" .Values.rules "where" "rules" "fallback" (include "nodegate.fullname" .)) | fromJson) }}
{{- end }}
{{- range $i, $value := .Values.nodeRules }}
{{- $objects = append $objects (include "nodegate.rulesObject" (dict "value" $value "where" (printf "nodeRules[%d]" $i) "fallback" "") | fromJson) }}
{{- end }}
{{- $seen := dict }}
{{- range $object := $objects }}
{{- $name := $object.name }}
{{- if not (kindIs "string" $name) }}
{{- fail (printf "%s: metadata.name %v is no string: quote it, e.g. name: \"%v\"" $object.where $name $name) }}
{{- end }}
{{- if not (and (le (len $name) 253) (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $name)) }}
{{- fail (printf "%s: metadata.name %q is no DNS subdomain, as a NodeRules object's name must be: lower-case letters, digits, '-' and '.', a letter or digit at each end, at most 253 characters (e.g. team-gpu)" $object.where $name) }}
{{- end }}
{{- if hasKey $seen $name }}
{{- fail (printf "%s: the NodeRules object %s is given twice (%s and %s): give each object its own metadata.name" $object.where $name (get $seen $name) $object.where) }}
{{- end }}
{{- $_ := set $seen $name $object.where }}
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
