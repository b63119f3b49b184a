variable "region" {
  description = "The fedgate region these hosts serve: a region declared in the policy file."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$", var.region))
    error_message = "region is a region name of the policy file: 1-63 lowercase letters, digits, '-' or '_'."
  }
}

variable "policy" {
  description = "The policy file's YAML text, the same for every region (docs/policies.md). Its defaults.store must be shared by every host (a NAS path mounted on each, or a cloud bucket)."
  type        = string

  validation {
    condition     = can(yamldecode(var.policy).regions)
    error_message = "policy is the YAML text of a policy file with regions (docs/policies.md)."
  }
}

variable "hosts" {
  description = "The region's gateway hosts, 3 or 5: id (the Raft node id, never changed once used) and address (the IP or DNS name the other hosts and clients reach it at; its --listen and --raft-addr host)."
  type = list(object({
    id      = string
    address = string
  }))

  validation {
    condition     = contains([3, 5], length(var.hosts))
    error_message = "hosts lists 3 or 5 hosts."
  }
}

variable "root_credentials" {
  description = "The region's root S3 keys, the same on every host: access_key (16-128 letters and digits) and secret_key (32-128 characters). They go to the environment file only."
  type = object({
    access_key = string
    secret_key = string
  })
  sensitive = true

  validation {
    condition     = can(regex("^[A-Za-z0-9]{16,128}$", var.root_credentials.access_key)) && can(regex("^[A-Za-z0-9+/=_.-]{32,128}$", var.root_credentials.secret_key))
    error_message = "root_credentials: access_key is 16-128 letters and digits; secret_key is 32-128 characters of A-Z a-z 0-9 + / = _ . -."
  }
}

variable "s3_endpoint" {
  description = "The region's S3 endpoint as clients reach it (your load balancer or DNS round-robin name, health check GET /_fedgate/readyz), e.g. http://fedgate.lga1.example:9000; null: the first host."
  type        = string
  default     = null

  validation {
    condition     = var.s3_endpoint == null || can(regex("^https?://[^\\s/]+$", var.s3_endpoint))
    error_message = "s3_endpoint is http(s)://HOST[:PORT] without a path."
  }
}

variable "output_dir" {
  description = "Where the rendered files are written, one directory per host id holding the files at their paths on the host (OUTPUT_DIR/n1/etc/fedgate/policy.yaml, ...), for your own tooling to place."
  type        = string
  default     = "fedgate-onprem"
}

variable "paths" {
  description = "Where things live on a host: the binary, the config dir, --data-dir (a persistent disk: Raft state) and --cache-dir (local NVMe: chunk cache and write-back staging), which your tooling mounts and gives to the service user."
  type = object({
    binary     = optional(string, "/usr/local/bin/fedgate")
    config_dir = optional(string, "/etc/fedgate")
    data_dir   = optional(string, "/var/lib/fedgate")
    cache_dir  = optional(string, "/var/cache/fedgate")
  })
  default = {}
}

variable "service_user" {
  description = "The system user fedgate runs as; your tooling creates it and gives it the data and cache dirs."
  type        = string
  default     = "fedgate"
}

variable "cache_size" {
  description = "--cache-size, e.g. 1500GiB; null: 80% of the space free on the cache filesystem plus what the cache holds (docs/cache.md)."
  type        = string
  default     = null

  validation {
    condition     = var.cache_size == null || can(regex("^[0-9]+(\\.[0-9]+)?(B|KB|MB|GB|TB|PB|KiB|MiB|GiB|TiB|PiB)?$", var.cache_size))
    error_message = "cache_size is a size such as 1500GiB."
  }
}

variable "staging_size" {
  description = "--staging-size (write-back staging in the cache dir), e.g. 300GiB; null: 10% of the cache filesystem."
  type        = string
  default     = null

  validation {
    condition     = var.staging_size == null || can(regex("^[0-9]+(\\.[0-9]+)?(B|KB|MB|GB|TB|PB|KiB|MiB|GiB|TiB|PiB)?$", var.staging_size))
    error_message = "staging_size is a size such as 300GiB."
  }
}

variable "peer_ca" {
  description = "A CA dedicated to this region's peers, {cert_pem, key_pem} (PEM). Given: every node gets a certificate from it (module peer-tls) and Raft and the internal API run mutual TLS. null: no TLS between nodes. The key stays in the Terraform state: keep the state encrypted."
  type = object({
    cert_pem = string
    key_pem  = string
  })
  default   = null
  sensitive = true
}

variable "s3_ca" {
  description = "A CA for the S3 port's certificates, {cert_pem, key_pem} (PEM), the one clients trust (AWS_CA_BUNDLE; docs/tls.md). Given: every node gets a certificate from it (module peer-tls) for its address, the region's endpoint (the host of s3_endpoint) and s3_names, and the S3 port serves HTTPS only; nodes trust it on each other's S3 ports. null: plain HTTP. The key stays in the Terraform state: keep the state encrypted."
  type = object({
    cert_pem = string
    key_pem  = string
  })
  default   = null
  sensitive = true
}

variable "s3_names" {
  description = "More names (host names or IPv4 addresses) the S3 certificates carry besides each node's address and the region's endpoint: other names clients reach the region at (a CNAME, another load balancer)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.s3_names : can(regex("^[A-Za-z0-9.*-]+$", a))])
    error_message = "s3_names are host names (a leading *. for a wildcard) or IPv4 addresses."
  }
}

variable "environment" {
  description = "Extra variables for the environment file, e.g. credentials for stores in the clouds."
  type        = map(string)
  default     = {}
  sensitive   = true

  validation {
    condition     = alltrue([for k, v in var.environment : can(regex("^[A-Z_][A-Z0-9_]*$", k)) && !can(regex("^FEDGATE_", k))])
    error_message = "environment: names are upper-case identifiers, not FEDGATE_* (the module sets those)."
  }
}

variable "credential_files" {
  description = "Files written to CONFIG_DIR/credentials/NAME (mode 0600, owned by the service user), e.g. a GCP credentials JSON."
  type        = map(string)
  default     = {}
  sensitive   = true

  validation {
    condition     = alltrue([for k, v in var.credential_files : can(regex("^[A-Za-z0-9][A-Za-z0-9._-]*$", k))])
    error_message = "credential_files: names are plain file names."
  }
}

variable "writable_paths" {
  description = "More directories fedgate may write besides its data and cache dirs (systemd ReadWritePaths=), e.g. [\"/mnt/nas/fedgate\"] for a posix store on a NAS mount. Absolute paths."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for p in var.writable_paths : can(regex("^/[A-Za-z0-9/._-]*$", p)) && !can(regex("(^|/)\\.\\.?(/|$)", p))])
    error_message = "writable_paths: each entry is an absolute path (starting with /) of letters, digits, '/', '.', '_' and '-', without . or .. components."
  }
}

variable "extra_args" {
  description = "More `fedgate server` flags, e.g. [\"--write-back-copies\", \"3\"]."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.extra_args : can(regex("^[^\\s\"'\\\\%$]+$", a))])
    error_message = "extra_args: each argument is one word without spaces, quotes, backslashes, '%' or '$'."
  }
}

variable "local_socket" {
  description = "The gateway's --local-socket under /run/fedgate/ (docs/gpu-data-path.md), for GPU hosts that run a gateway: the server serves it and every mount reads through it; null: off (module node-config)."
  type        = string
  default     = null
}

variable "mounts" {
  description = "`fedgate mount`s each host runs as fedgate-mount-NAME.service (docs/mount.md): name, bucket (bucket or bucket/prefix), mountpoint, endpoint (null: the host's own S3 port), stat_ttl, allow_other (true), read_only (true), uid, gid; see module node-config. Empty: none."
  type = list(object({
    name        = string
    bucket      = string
    mountpoint  = string
    endpoint    = optional(string)
    stat_ttl    = optional(string)
    allow_other = optional(bool, true)
    read_only   = optional(bool, true)
    uid         = optional(number)
    gid         = optional(number)
  }))
  default = []
}

variable "mount_credentials" {
  description = "The S3 keys the mounts sign with, {access_key, secret_key} of a fedgate user that may read the mounted buckets; null: root_credentials."
  type = object({
    access_key = string
    secret_key = string
  })
  default   = null
  sensitive = true
}
