variable "namespace" {
  description = "The Kubernetes namespace the region runs in."
  type        = string
  default     = "fedgate"

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", var.namespace))
    error_message = "namespace is a DNS label: 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit."
  }
}

variable "create_namespace" {
  description = "Create the namespace when it does not exist (helm --create-namespace)."
  type        = bool
  default     = true
}

variable "release_name" {
  description = "The Helm release name. The module sets the chart's fullnameOverride to it, so it is also the S3 Service's name (and RELEASE-nodes the headless Service's)."
  type        = string
  default     = "fedgate"

  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]{0,45}[a-z0-9])?$", var.release_name))
    error_message = "release_name is 1-47 lowercase letters, digits and '-', starting with a letter (pod names RELEASE-N and the Service RELEASE-nodes must stay DNS labels)."
  }
}

variable "chart" {
  description = "The chart: a path (null: deploy/helm/fedgate of the checkout this module comes from, so a git source pinned with ?ref= installs that release's chart), or the chart's name in chart_repository."
  type        = string
  default     = null
}

variable "chart_repository" {
  description = "A chart repository URL (https:// or oci://) to install chart from; null: chart is a path."
  type        = string
  default     = null

  validation {
    condition     = var.chart_repository == null || can(regex("^(https?|oci)://[^\\s]+$", var.chart_repository))
    error_message = "chart_repository is an https://, http:// or oci:// URL."
  }
}

variable "chart_version" {
  description = "The chart version (the fedgate release without its v, e.g. 0.1.0); required with chart_repository; null with a path: the chart's own."
  type        = string
  default     = null

  validation {
    condition     = var.chart_version == null || can(regex("^[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.-]+)?$", var.chart_version))
    error_message = "chart_version is a semantic version such as 0.1.0 (no leading v)."
  }
}

variable "replicas" {
  description = "Gateway pods, the region's Raft voters: 1, 3 or 5. An even count is refused: it survives no more failures than the odd count below it."
  type        = number
  default     = 3

  validation {
    condition     = var.replicas % 2 == 1
    error_message = "replicas is odd: a Raft region of an even count survives no more failures than one of a node fewer; use 1, 3 or 5."
  }
  validation {
    condition     = contains([1, 3, 5], var.replicas)
    error_message = "replicas is 1, 3 or 5 (3 survives one failure, 5 two; more only slows commits)."
  }
}

variable "region" {
  description = "--region: the policy's region these pods serve; null: the policy's only region."
  type        = string
  default     = null

  validation {
    condition     = var.region == null || can(regex("^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$", var.region))
    error_message = "region is a region name of the policy file: 1-63 lowercase letters, digits, '-' or '_'."
  }
}

variable "s3_region" {
  description = "--s3-region, the signing region clients use; null: the chart's (us-east-1)."
  type        = string
  default     = null
}

variable "policy" {
  description = "The policy file's YAML text (docs/policies.md), rendered into the policy ConfigMap. A region of more than one pod needs a shared default store."
  type        = string

  validation {
    condition     = can(yamldecode(var.policy).regions)
    error_message = "policy is the YAML text of a policy file with regions (docs/policies.md)."
  }
}

variable "server_config" {
  description = "More keys of the server config file (docs/server-config.md): flags of `fedgate server --help` without dashes, e.g. { \"cache-size\" = \"1500GiB\", \"write-back-copies\" = 2 }. The keys the chart sets itself are refused."
  type        = any
  default     = {}

  validation {
    # The keys the chart sets itself (its template fedgate.serverConfig).
    condition = can(keys(var.server_config)) && alltrue([for k in try(keys(var.server_config), []) : can(regex("^[a-z][a-z0-9-]*$", k)) && !contains([
      "listen", "raft-addr", "internal-addr", "node-id", "join", "bootstrap-expect", "bootstrap", "config", "data-dir",
      "cache-dir", "region", "s3-region", "cert-file", "key-file", "ca-file", "peer-cert-file", "peer-key-file",
      "peer-ca-file", "peer-server-name", "local-socket", "local-socket-mode", "shutdown-timeout", "access-key",
      "secret-key", "server-config",
    ], k)])
    error_message = "server_config is a map of `fedgate server` flag names (without dashes) to values; the chart sets listen, raft-addr, internal-addr, node-id, join, bootstrap(-expect), config, data-dir, cache-dir, region, s3-region, the TLS files, local-socket(-mode), shutdown-timeout (see shutdown_timeout), the root keys and server-config itself."
  }
}

variable "shutdown_timeout" {
  description = "--shutdown-timeout: how long SIGTERM drains in-flight requests, whole seconds or minutes (60s, 2m); the pods' termination grace period follows it. null: the chart's."
  type        = string
  default     = null

  validation {
    condition     = var.shutdown_timeout == null || can(regex("^[0-9]+[sm]$", var.shutdown_timeout))
    error_message = "shutdown_timeout is whole seconds or minutes, such as 60s or 2m."
  }
}

variable "image" {
  description = "The fedgate image: repository, tag (null: the chart's appVersion, the release it was packaged with) and pull_policy."
  type = object({
    repository  = optional(string)
    tag         = optional(string)
    pull_policy = optional(string)
  })
  default = {}

  validation {
    condition     = var.image.pull_policy == null || contains(["Always", "IfNotPresent", "Never"], coalesce(var.image.pull_policy, "-"))
    error_message = "image.pull_policy is Always, IfNotPresent or Never."
  }
  validation {
    condition     = var.image.tag == null || can(regex("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", coalesce(var.image.tag, "-")))
    error_message = "image.tag is an image tag: letters, digits, '_', '.' and '-', at most 128."
  }
}

variable "image_pull_secrets" {
  description = "Names of Secrets in the namespace to pull the image with."
  type        = list(string)
  default     = []
}

variable "storage" {
  description = "Each pod's volumes: mode volumeClaimTemplates (a PVC per pod and volume from storage_class; local NVMe through a local-volume StorageClass) or hostPath (host_path directories on the node); data (Raft state: a persistent disk), cache (chunk cache: local NVMe) and staging (write-back staging: local NVMe, fsynced), each with size (a Kubernetes quantity such as 1Ti), storage_class (\"\": the cluster's default) and host_path. Unset fields keep the chart's defaults."
  type = object({
    mode = optional(string)
    data = optional(object({
      size          = optional(string)
      storage_class = optional(string)
      host_path     = optional(string)
    }), {})
    cache = optional(object({
      size          = optional(string)
      storage_class = optional(string)
      host_path     = optional(string)
    }), {})
    staging = optional(object({
      size          = optional(string)
      storage_class = optional(string)
      host_path     = optional(string)
    }), {})
  })
  default = {}

  validation {
    condition     = var.storage.mode == null || contains(["volumeClaimTemplates", "hostPath"], coalesce(var.storage.mode, "-"))
    error_message = "storage.mode is volumeClaimTemplates or hostPath."
  }
  validation {
    condition = alltrue([for v in [var.storage.data, var.storage.cache, var.storage.staging] :
    v.size == null || can(regex("^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$", coalesce(v.size, "-")))])
    error_message = "storage sizes are Kubernetes quantities such as 20Gi or 1Ti."
  }
  validation {
    condition = alltrue([for v in [var.storage.data, var.storage.cache, var.storage.staging] :
    v.host_path == null || can(regex("^/[A-Za-z0-9/._-]*$", coalesce(v.host_path, "-"))) && !can(regex("(^|/)\\.\\.?(/|$)", coalesce(v.host_path, "-")))])
    error_message = "storage host paths are absolute paths of letters, digits, '/', '.', '_' and '-', without . or .. components."
  }
  validation {
    condition = alltrue([for v in [var.storage.data, var.storage.cache, var.storage.staging] :
    v.storage_class == null || can(regex("^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?)?$", v.storage_class))])
    error_message = "storage classes are StorageClass names (lowercase DNS names), or \"\" for the cluster's default."
  }
}

variable "service" {
  description = "The S3 Service: type ClusterIP or LoadBalancer, annotations (your cloud's load balancer settings), load_balancer_source_ranges (CIDRs) and external_traffic_policy (Local keeps client addresses; LoadBalancer only)."
  type = object({
    type                        = optional(string, "ClusterIP")
    annotations                 = optional(map(string), {})
    load_balancer_source_ranges = optional(list(string), [])
    external_traffic_policy     = optional(string)
  })
  default = {}

  validation {
    condition     = contains(["ClusterIP", "LoadBalancer"], var.service.type)
    error_message = "service.type is ClusterIP or LoadBalancer."
  }
  validation {
    condition     = alltrue([for c in var.service.load_balancer_source_ranges : can(cidrhost(c, 0))])
    error_message = "service.load_balancer_source_ranges are CIDR blocks such as 10.10.0.0/16."
  }
  validation {
    condition     = var.service.external_traffic_policy == null || contains(["Local", "Cluster"], coalesce(var.service.external_traffic_policy, "-"))
    error_message = "service.external_traffic_policy is Local or Cluster."
  }
}

variable "s3_port" {
  description = "The S3 port of the pods and the Service (--listen)."
  type        = number
  default     = 9000

  validation {
    condition     = var.s3_port >= 1 && var.s3_port <= 65535 && floor(var.s3_port) == var.s3_port
    error_message = "s3_port is a port number, 1-65535."
  }
}

variable "cluster_domain" {
  description = "The cluster's DNS domain: the Services' names end in it."
  type        = string
  default     = "cluster.local"
}

variable "tls" {
  description = "HTTPS on the S3 port (docs/tls.md): existing_secret, a kubernetes.io/tls Secret (tls.crt, tls.key; ca_key, when that key is present, becomes --ca-file), or cert_manager_issuer {name, kind} for a cert-manager Certificate (dns_names: more names, e.g. a load balancer's). null: plain HTTP."
  type = object({
    existing_secret = optional(string)
    ca_key          = optional(string)
    cert_manager_issuer = optional(object({
      name = string
      kind = optional(string, "ClusterIssuer")
    }))
    dns_names = optional(list(string), [])
  })
  default = null

  validation {
    condition     = var.tls == null || (try(var.tls.existing_secret, null) == null) != (try(var.tls.cert_manager_issuer, null) == null)
    error_message = "tls gives exactly one of existing_secret and cert_manager_issuer."
  }
  validation {
    condition     = var.tls == null || alltrue([for n in try(var.tls.dns_names, []) : can(regex("^[A-Za-z0-9.*-]+$", n))])
    error_message = "tls.dns_names are host names (a leading *. for a wildcard)."
  }
}

variable "peer_tls" {
  description = "Mutual TLS between the gateway pods (Raft, internal API): existing_secret with tls.crt, tls.key and ca.crt whose certificate names *.RELEASE-nodes.NAMESPACE.svc.CLUSTER_DOMAIN with server and client auth, or cert_manager_issuer {name, kind}. null: no TLS between pods."
  type = object({
    existing_secret = optional(string)
    cert_manager_issuer = optional(object({
      name = string
      kind = optional(string, "Issuer")
    }))
  })
  default = null

  validation {
    condition     = var.peer_tls == null || (try(var.peer_tls.existing_secret, null) == null) != (try(var.peer_tls.cert_manager_issuer, null) == null)
    error_message = "peer_tls gives exactly one of existing_secret and cert_manager_issuer."
  }
}

variable "root_credentials" {
  description = "The region's root S3 keys, access_key (16-128 letters and digits) and secret_key (32-128 characters), rendered into the chart's Secret. null with root_credentials_secret null: the chart generates a pair once and keeps it."
  type = object({
    access_key = string
    secret_key = string
  })
  default   = null
  sensitive = true

  validation {
    condition     = var.root_credentials == null || can(regex("^[A-Za-z0-9]{16,128}$", var.root_credentials.access_key)) && can(regex("^[A-Za-z0-9+/=_.-]{32,128}$", var.root_credentials.secret_key))
    error_message = "root_credentials: access_key is 16-128 letters and digits; secret_key is 32-128 characters of A-Z a-z 0-9 + / = _ . -."
  }
}

variable "root_credentials_secret" {
  description = "An existing Secret in the namespace holding the root keys (keys access-key and secret-key), instead of root_credentials."
  type        = string
  default     = null
}

variable "store_credentials" {
  description = "The environment variables the policy's store credentials name (access_key_env, ...), rendered into the chart's Secret: NAME => value."
  type        = map(string)
  default     = {}
  sensitive   = true

  validation {
    condition     = alltrue([for k, v in var.store_credentials : can(regex("^[A-Z_][A-Z0-9_]*$", k)) && !can(regex("^FEDGATE_", k))])
    error_message = "store_credentials: names are upper-case identifiers, not FEDGATE_* (the chart sets those)."
  }
}

variable "store_credentials_secret" {
  description = "An existing Secret in the namespace whose every key becomes an environment variable of the pods, instead of store_credentials."
  type        = string
  default     = null
}

variable "resources" {
  description = "The gateway container's resources {requests, limits}, e.g. { requests = { cpu = \"2\", memory = \"4Gi\" }, limits = { memory = \"16Gi\" } }; null: the chart's."
  type = object({
    requests = optional(map(string))
    limits   = optional(map(string))
  })
  default = null
}

variable "node_selector" {
  description = "Node labels the gateway pods are scheduled on."
  type        = map(string)
  default     = {}
}

variable "tolerations" {
  description = "Tolerations of the gateway pods (Kubernetes Toleration objects)."
  type = list(object({
    key      = optional(string)
    operator = optional(string)
    value    = optional(string)
    effect   = optional(string)
  }))
  default = []
}

variable "anti_affinity" {
  description = "How gateway pods spread over hosts and zones: required (a pod stays Pending rather than share), preferred (the scheduler tries) or none; null fields keep the chart's (hostname required, zone preferred)."
  type = object({
    hostname = optional(string)
    zone     = optional(string)
  })
  default = {}

  validation {
    condition     = alltrue([for v in [var.anti_affinity.hostname, var.anti_affinity.zone] : v == null || contains(["required", "preferred", "none"], coalesce(v, "-"))])
    error_message = "anti_affinity.hostname and .zone are required, preferred or none."
  }
}

variable "local_socket" {
  description = "Serve the node-local short-circuit socket (--local-socket, docs/gpu-data-path.md) in a hostPath directory the mount pods on the same host share."
  type        = bool
  default     = false
}

variable "monitoring" {
  description = "What the Prometheus Operator and Grafana get: service_monitor and prometheus_rule (rendered only when monitoring.coreos.com/v1 is served), grafana_dashboard (a ConfigMap for Grafana's sidecar), and labels for the ServiceMonitor and PrometheusRule (your Prometheus's selectors)."
  type = object({
    service_monitor   = optional(bool, true)
    prometheus_rule   = optional(bool, true)
    grafana_dashboard = optional(bool, true)
    labels            = optional(map(string), {})
  })
  default = {}
}

variable "mount" {
  description = "`fedgate mount` on every GPU node (a DaemonSet, docs/kubernetes.md): enabled, node_selector (null: the chart's nvidia.com/gpu.present), host_path (where training pods find it), bucket (null: every bucket), read_only, endpoint (null: this release's S3 Service), existing_secret (the S3 keys of a fedgate user, keys access-key and secret-key) and extra_flags (`fedgate mount` flags without dashes)."
  type = object({
    enabled         = optional(bool, false)
    node_selector   = optional(map(string))
    host_path       = optional(string)
    bucket          = optional(string)
    read_only       = optional(bool)
    endpoint        = optional(string)
    existing_secret = optional(string)
    extra_flags     = optional(map(string))
  })
  default = {}

  validation {
    condition     = var.mount.host_path == null || can(regex("^/[A-Za-z0-9/._-]*$", coalesce(var.mount.host_path, "-"))) && !can(regex("(^|/)\\.\\.?(/|$)", coalesce(var.mount.host_path, "-")))
    error_message = "mount.host_path is an absolute path of letters, digits, '/', '.', '_' and '-', without . or .. components."
  }
  validation {
    condition     = var.mount.endpoint == null || can(regex("^https?://[^\\s/]+$", coalesce(var.mount.endpoint, "-")))
    error_message = "mount.endpoint is http(s)://HOST[:PORT] without a path."
  }
  validation {
    condition     = !var.mount.enabled || var.mount.existing_secret != null
    error_message = "mount.existing_secret names the Secret with the S3 keys of a fedgate user (fedgate user add) for the mount: the chart needs it when the mount is enabled."
  }
}

variable "extra_values" {
  description = "More values files' YAML text, applied after the module's (Helm merges them deeply): anything of the chart's values.yaml the inputs above do not cover."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for v in var.extra_values : can(keys(yamldecode(v)))])
    error_message = "extra_values are YAML mappings (values files)."
  }
}

variable "timeout" {
  description = "Seconds Helm waits for the release to be ready (every pod Ready: with a rolling update one pod at a time, allow a few minutes per pod)."
  type        = number
  default     = 900

  validation {
    condition     = var.timeout >= 60
    error_message = "timeout is at least 60 seconds."
  }
}
