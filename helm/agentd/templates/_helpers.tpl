{{/*
Chart name, truncated to the 63 characters a DNS label allows.
*/}}
{{- define "agentd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: "<release>-<chart>", or the release name when it already contains the
chart name. Truncated to 63 characters (the longest suffix added below is "-headless").
*/}}
{{- define "agentd.fullname" -}}
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

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "agentd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels common to every object of the release.
*/}}
{{- define "agentd.labels" -}}
helm.sh/chart: {{ include "agentd.chart" . }}
app.kubernetes.io/name: {{ include "agentd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "agentd.imageTag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: agentd
{{- end }}

{{/*
Selector labels of the agentd server pods. The component label keeps them apart from the bundled
Redis pods of the same release.
*/}}
{{- define "agentd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{/*
Selector labels of the bundled Redis pod.
*/}}
{{- define "agentd.redis.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{/*
Name of the label that lets a pod reach agentd when networkPolicy.allowExternal is false.
*/}}
{{- define "agentd.clientLabel" -}}
{{- printf "%s-client" (include "agentd.fullname" .) }}
{{- end }}

{{/*
ServiceAccount name.
*/}}
{{- define "agentd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "agentd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
agentd image tag: image.tag, else the chart's appVersion.
*/}}
{{- define "agentd.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/*
"repository:tag" or "repository@digest" from an image block.
Call with (dict "image" .Values.x.image "defaultTag" "...").
*/}}
{{- define "agentd.imageRef" -}}
{{- if .image.digest }}
{{- printf "%s@%s" .image.repository .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository (default .defaultTag .image.tag) }}
{{- end }}
{{- end }}

{{/*
Names of the bundled Redis objects.
*/}}
{{- define "agentd.redis.fullname" -}}
{{- printf "%s-redis" (include "agentd.fullname" . | trunc 48 | trimSuffix "-") }}
{{- end }}

{{/*
Secret holding the bundled Redis password.
*/}}
{{- define "agentd.redis.passwordSecret" -}}
{{- default .Values.secrets.existingSecret .Values.store.bundled.auth.existingSecret }}
{{- end }}

{{/*
Name of the data PVC created by the chart.
*/}}
{{- define "agentd.dataClaimName" -}}
{{- default (printf "%s-data" (include "agentd.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/*
terminationGracePeriodSeconds: the preStop sleep, the pre-drain, the server's drain time and a
margin.
*/}}
{{- define "agentd.terminationGracePeriodSeconds" -}}
{{- $a := .Values.agentd }}
{{- add (include "agentd.preStopSleepSeconds" .) $a.preDrainSeconds $a.shutdownGraceSeconds $a.terminationGraceMarginSeconds }}
{{- end }}

{{/*
The preStop sleep actually rendered: the native sleep action exists from Kubernetes 1.30.
*/}}
{{- define "agentd.preStopSleepSeconds" -}}
{{- if semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version }}
{{- .Values.agentd.preStopSleepSeconds }}
{{- else }}
{{- 0 }}
{{- end }}
{{- end }}

{{/*
Checks across values that a JSON schema cannot state with a clear message. Included by the
Deployment so that every render runs them.
*/}}
{{- define "agentd.validate" -}}
{{- $mode := .Values.store.mode }}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) }}
{{- fail "tls.enabled needs tls.secretName: a kubernetes.io/tls Secret (tls.crt, tls.key; ca.crt for tls.clientAuth) in the release namespace." }}
{{- end }}
{{- if eq $mode "embedded" }}
{{- if .Values.autoscaling.enabled }}
{{- fail "store.mode=embedded is single-writer: autoscaling.enabled must be false. Use store.mode=external (your Redis) or store.mode=bundled to run more than one replica." }}
{{- end }}
{{- if gt (int .Values.replicaCount) 1 }}
{{- fail (printf "store.mode=embedded is single-writer: replicaCount must be 1 (got %d). Use store.mode=external (your Redis) or store.mode=bundled to run more than one replica." (int .Values.replicaCount)) }}
{{- end }}
{{- end }}
{{- if and .Values.persistence.enabled (or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1)) }}
{{- fail "persistence.enabled gives the pod one ReadWriteOnce volume for the embedded store: it needs replicaCount 1 and autoscaling off. With a Redis store leave persistence off." }}
{{- end }}
{{- if eq $mode "external" }}
{{- $ext := .Values.store.external }}
{{- if and (not $ext.url) (not $ext.urlSecret.name) }}
{{- fail "store.mode=external needs store.external.url (e.g. redis://redis.example:6379/0, redis+cluster://node-0:6379,node-1:6379 or redis+sentinel://sentinel-0:26379,sentinel-1:26379/mymaster) or store.external.urlSecret {name, key}." }}
{{- end }}
{{- if and $ext.urlSecret.name (not $ext.urlSecret.key) }}
{{- fail "store.external.urlSecret.key is required when store.external.urlSecret.name is set." }}
{{- end }}
{{- if and $ext.passwordSecret.name (not $ext.passwordSecret.key) }}
{{- fail "store.external.passwordSecret.key is required when store.external.passwordSecret.name is set." }}
{{- end }}
{{- if not $ext.urlSecret.name }}
{{- /* Credentials first, so that the messages below never echo a password. */}}
{{- if contains "@" $ext.url }}
{{- fail "store.external.url must not carry credentials (they would be stored in the release and the pod spec): use store.external.passwordSecret, or move the whole URL to store.external.urlSecret." }}
{{- end }}
{{- $kind := include "agentd.storeUrlKind" $ext.url }}
{{- $hosts := `[^/?#,\s]+:[0-9]{1,5}(,[^/?#,\s]+:[0-9]{1,5})*` }}
{{- if eq $kind "cluster" }}
{{- if not (regexMatch (printf `^rediss?\+cluster://%s/?$` $hosts) $ext.url) }}
{{- fail (printf "store.external.url: a redis+cluster:// URL lists seed nodes as host:port, comma-separated, with no /db, path or ?query (a cluster only has database 0), e.g. redis+cluster://node-0.redis:6379,node-1.redis:6379 (got %q)." $ext.url) }}
{{- end }}
{{- else if eq $kind "sentinel" }}
{{- if not (regexMatch (printf `^rediss?\+sentinel://%s/[^/?#\s]+(/[0-9]+)?/?$` $hosts) $ext.url) }}
{{- fail (printf "store.external.url: a redis+sentinel:// URL lists the Sentinels as host:port, comma-separated, then the master name and an optional database, with no ?query: redis+sentinel://sentinel-0.redis:26379,sentinel-1.redis:26379/mymaster[/0] (got %q)." $ext.url) }}
{{- end }}
{{- else if not (regexMatch "^rediss?://[^@/]+" $ext.url) }}
{{- fail (printf "store.external.url must look like redis://host:port/db, rediss://host:port/db, redis+cluster://host:port,host:port or redis+sentinel://host:port,host:port/<master name>[/<db>] (got %q)." $ext.url) }}
{{- end }}
{{- if and (gt (int $ext.waitReplicas) 0) (eq $kind "cluster") }}
{{- fail (printf "store.external.waitReplicas=%d is not supported with a redis+cluster:// URL (agentd runs WAIT on the connection of the write, which a cluster connection does not expose): set it to 0, or use one node or Sentinel." (int $ext.waitReplicas)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and (eq $mode "bundled") .Values.store.bundled.auth.enabled (not (include "agentd.redis.passwordSecret" .)) }}
{{- fail "store.bundled.auth.enabled needs a Secret: set store.bundled.auth.existingSecret or secrets.existingSecret." }}
{{- end }}
{{- if and (or .Values.secrets.apiKeysKey .Values.secrets.envFromExistingSecret) (not .Values.secrets.existingSecret) }}
{{- fail "secrets.apiKeysKey and secrets.envFromExistingSecret need secrets.existingSecret (the name of a Secret you created)." }}
{{- end }}
{{- range .Values.secrets.providerKeys }}
{{- if not (or .secretName $.Values.secrets.existingSecret) }}
{{- fail (printf "secrets.providerKeys[%s] names no Secret: set its secretName or secrets.existingSecret." .name) }}
{{- end }}
{{- end }}
{{- if and .Values.otel.headersSecret.name (not .Values.otel.headersSecret.key) }}
{{- fail "otel.headersSecret.key is required when otel.headersSecret.name is set." }}
{{- end }}
{{- if and .Values.autoscaling.enabled (lt (int .Values.autoscaling.maxReplicas) (int .Values.autoscaling.minReplicas)) }}
{{- fail "autoscaling.maxReplicas must be >= autoscaling.minReplicas." }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (not (kindIs "invalid" .Values.podDisruptionBudget.minAvailable)) (not (kindIs "invalid" .Values.podDisruptionBudget.maxUnavailable)) }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both (set the other to null)." }}
{{- end }}
{{- end }}

{{/*
Which Redis deployment an external store URL names: "cluster" (redis+cluster://, rediss+cluster://),
"sentinel" (redis+sentinel://, rediss+sentinel://) or "node" (anything else). Call with the URL.
*/}}
{{- define "agentd.storeUrlKind" -}}
{{- if regexMatch `^rediss?\+cluster://` . }}cluster
{{- else if regexMatch `^rediss?\+sentinel://` . }}sentinel
{{- else }}node
{{- end }}
{{- end }}

{{/*
The store URL env vars of the agentd container (REDIS_PASSWORD first, so that $(REDIS_PASSWORD)
expands in AGENTD_STORE_URL). Nothing for the embedded store.
*/}}
{{- define "agentd.storeEnv" -}}
{{- $mode := .Values.store.mode }}
{{- if eq $mode "external" }}
{{- $ext := .Values.store.external }}
{{- if $ext.urlSecret.name }}
- name: AGENTD_STORE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $ext.urlSecret.name }}
      key: {{ $ext.urlSecret.key }}
{{- else if $ext.passwordSecret.name }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $ext.passwordSecret.name }}
      key: {{ $ext.passwordSecret.key }}
- name: AGENTD_STORE_URL
  value: {{ regexReplaceAll `^(rediss?(\+cluster|\+sentinel)?://)` $ext.url (printf "${1}%s:$(REDIS_PASSWORD)@" $ext.username) | quote }}
{{- else }}
- name: AGENTD_STORE_URL
  value: {{ $ext.url | quote }}
{{- end }}
{{- if gt (int $ext.waitReplicas) 0 }}
- name: AGENTD_STORE_WAIT_REPLICAS
  value: {{ int $ext.waitReplicas | quote }}
- name: AGENTD_STORE_WAIT_TIMEOUT_MS
  value: {{ int $ext.waitTimeoutMs | quote }}
{{- end }}
{{- else if eq $mode "bundled" }}
{{- $b := .Values.store.bundled }}
{{- if $b.auth.enabled }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "agentd.redis.passwordSecret" . }}
      key: {{ $b.auth.passwordKey }}
- name: AGENTD_STORE_URL
  value: {{ printf "redis://:$(REDIS_PASSWORD)@%s:%d/%d" (include "agentd.redis.fullname" .) (int $b.port) (int $b.database) | quote }}
{{- else }}
- name: AGENTD_STORE_URL
  value: {{ printf "redis://%s:%d/%d" (include "agentd.redis.fullname" .) (int $b.port) (int $b.database) | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
OTEL_RESOURCE_ATTRIBUTES: the pod's identity plus otel.resourceAttributes, sorted.
*/}}
{{- define "agentd.otelResourceAttributes" -}}
{{- $attrs := list "k8s.namespace.name=$(POD_NAMESPACE)" "k8s.pod.name=$(POD_NAME)" (printf "service.version=%s" (include "agentd.imageTag" .)) }}
{{- range $k, $v := .Values.otel.resourceAttributes }}
{{- $attrs = append $attrs (printf "%s=%v" $k $v) }}
{{- end }}
{{- join "," $attrs }}
{{- end }}
