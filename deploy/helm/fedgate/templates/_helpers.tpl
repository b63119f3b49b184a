{{/* Names. */}}
{{- define "fedgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fedgate.fullname" -}}
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

{{/* The headless Service of the gateway pods (Raft, internal API, --join). */}}
{{- define "fedgate.headless" -}}
{{- printf "%s-nodes" (include "fedgate.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fedgate.labels" -}}
app.kubernetes.io/name: {{ include "fedgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "fedgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fedgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end -}}

{{- define "fedgate.mountSelectorLabels" -}}
app.kubernetes.io/name: {{ include "fedgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: mount
{{- end -}}

{{- define "fedgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The replica count, refused unless 1, 3 or 5. */}}
{{- define "fedgate.replicas" -}}
{{- $n := int .Values.replicas -}}
{{- if eq (mod $n 2) 0 -}}
{{- fail (printf "replicas: %d is even: a Raft region of %d nodes survives no more failures than one of %d; use 1, 3 or 5" $n $n (sub $n 1)) -}}
{{- end -}}
{{- if not (has $n (list 1 3 5)) -}}
{{- fail (printf "replicas: %d: use 1, 3 or 5 (a Raft region of 3 survives one failure, 5 two; more only slows commits)" $n) -}}
{{- end -}}
{{- $n -}}
{{- end -}}

{{/* The S3 scheme of every pod's port. */}}
{{- define "fedgate.scheme" -}}
{{- if .Values.tls.enabled -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{/* Pod i's DNS name in the headless Service: include "fedgate.podHost" (dict "ctx" $ "i" 0). */}}
{{- define "fedgate.podHost" -}}
{{- $ctx := .ctx -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "fedgate.fullname" $ctx) (int .i) (include "fedgate.headless" $ctx) $ctx.Release.Namespace $ctx.Values.clusterDomain -}}
{{- end -}}

{{/* --join: every pod's S3 address, comma-separated (a node finding itself there answers its own info). */}}
{{- define "fedgate.join" -}}
{{- $n := int (include "fedgate.replicas" .) -}}
{{- $addrs := list -}}
{{- range $i := until $n -}}
{{- $addrs = append $addrs (printf "%s:%d" (include "fedgate.podHost" (dict "ctx" $ "i" $i)) (int $.Values.ports.s3)) -}}
{{- end -}}
{{- join "," $addrs -}}
{{- end -}}

{{- define "fedgate.rootSecret" -}}
{{- default (printf "%s-root" (include "fedgate.fullname" .)) .Values.rootCredentials.existingSecret -}}
{{- end -}}

{{- define "fedgate.storeSecret" -}}
{{- default (printf "%s-stores" (include "fedgate.fullname" .)) .Values.storeCredentials.existingSecret -}}
{{- end -}}

{{- define "fedgate.policyConfigMap" -}}
{{- default (printf "%s-policy" (include "fedgate.fullname" .)) .Values.policy.existingConfigMap -}}
{{- end -}}

{{- define "fedgate.tlsSecret" -}}
{{- default (printf "%s-s3-tls" (include "fedgate.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{- define "fedgate.peerSecret" -}}
{{- default (printf "%s-peer-tls" (include "fedgate.fullname" .)) .Values.peerTLS.existingSecret -}}
{{- end -}}

{{- define "fedgate.certManager" -}}
{{- if .Capabilities.APIVersions.Has "cert-manager.io/v1/Certificate" -}}true{{- end -}}
{{- end -}}

{{- define "fedgate.promOperator" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- end -}}

{{/* The server config file (--server-config): the chart's keys and .Values.serverConfig. */}}
{{- define "fedgate.serverConfig" -}}
{{- $owned := list "listen" "raft-addr" "internal-addr" "node-id" "join" "bootstrap-expect" "bootstrap" "config" "data-dir" "cache-dir" "region" "s3-region" "cert-file" "key-file" "ca-file" "peer-cert-file" "peer-key-file" "peer-ca-file" "peer-server-name" "local-socket" "local-socket-mode" "shutdown-timeout" "access-key" "secret-key" "server-config" -}}
{{- range $k, $v := .Values.serverConfig -}}
{{- if has $k $owned -}}
{{- fail (printf "serverConfig.%s: the chart sets this key itself; use the chart's own value (docs/kubernetes.md)" $k) -}}
{{- end -}}
{{- end -}}
{{- $cfg := dict
  "listen" (printf "0.0.0.0:%d" (int .Values.ports.s3))
  "internal-addr" (printf "0.0.0.0:%d" (int .Values.ports.internal))
  "config" "/etc/fedgate/policy/policy.yaml"
  "data-dir" "/var/lib/fedgate"
  "cache-dir" "/var/cache/fedgate"
  "s3-region" .Values.s3Region
  "shutdown-timeout" .Values.shutdownTimeout -}}
{{- if .Values.region -}}{{- $_ := set $cfg "region" .Values.region -}}{{- end -}}
{{- if .Values.tls.enabled -}}
{{- $_ := set $cfg "cert-file" "/etc/fedgate/tls/tls.crt" -}}
{{- $_ := set $cfg "key-file" "/etc/fedgate/tls/tls.key" -}}
{{- if .Values.tls.caKey -}}{{- $_ := set $cfg "ca-file" "/etc/fedgate/tls/ca.crt" -}}{{- end -}}
{{- end -}}
{{- if .Values.peerTLS.enabled -}}
{{- $_ := set $cfg "peer-cert-file" "/etc/fedgate/peer-tls/tls.crt" -}}
{{- $_ := set $cfg "peer-key-file" "/etc/fedgate/peer-tls/tls.key" -}}
{{- $_ := set $cfg "peer-ca-file" "/etc/fedgate/peer-tls/ca.crt" -}}
{{- end -}}
{{- if .Values.localSocket.enabled -}}
{{- $_ := set $cfg "local-socket" "/run/fedgate/s3.sock" -}}
{{- $_ := set $cfg "local-socket-mode" .Values.localSocket.mode -}}
{{- end -}}
{{- toYaml (merge $cfg .Values.serverConfig) -}}
{{- end -}}

{{- define "fedgate.serviceAccount" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "fedgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}
