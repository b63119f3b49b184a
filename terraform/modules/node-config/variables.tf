variable "region" {
  description = "The fedgate region these nodes serve: a region name declared in the policy file (passed as --region)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$", var.region))
    error_message = "region must be a policy name: 1-63 lowercase letters, digits, '-' or '_', starting and ending with a letter or digit."
  }
}

variable "policy" {
  description = "The policy file's YAML text (docs/policies.md). The same file goes to every region; it must declare var.region and a shared default store."
  type        = string

  validation {
    condition     = can(yamldecode(var.policy))
    error_message = "policy must be YAML."
  }
}

variable "nodes" {
  description = "Every node of the region, in a fixed order: id (the Raft node id, never changed once used), address (the private IP or DNS name peers and clients dial) and data_disk (the block device of the persistent disk that holds --data-dir; null when the host mounts it itself)."
  type = list(object({
    id        = string
    address   = string
    data_disk = optional(string)
  }))

  validation {
    condition     = contains([3, 5], length(var.nodes)) && length(var.nodes) == length(distinct([for n in var.nodes : n.id])) && length(var.nodes) == length(distinct([for n in var.nodes : n.address]))
    error_message = "nodes must list 3 or 5 nodes (a Raft region survives the loss of 1 or 2), with distinct ids and addresses."
  }
  validation {
    condition     = alltrue([for n in var.nodes : can(regex("^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", n.id)) && can(regex("^[A-Za-z0-9.-]+$", n.address))])
    error_message = "node ids are 1-63 letters, digits, '.', '_' or '-'; addresses are an IPv4 address or a host name."
  }
}

variable "root_credentials" {
  description = "The region's root S3 keys (FEDGATE_ACCESS_KEY, FEDGATE_SECRET_KEY), the same on every node; written to the environment file only."
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

variable "binary" {
  description = "Where each node downloads the fedgate binary at first boot (null: the host installs it itself, and no cloud-init is rendered), and its sha256 (checked before it is installed). auth: none (a plain http(s) URL), aws (SigV4 with the instance role; aws_region is the bucket's region), gcp (the instance service account's token) or azure (a managed identity token; azure_client_id picks a user-assigned identity)."
  type = object({
    url             = string
    sha256          = string
    auth            = optional(string, "none")
    aws_region      = optional(string, "")
    azure_client_id = optional(string, "")
  })
  default = null

  validation {
    condition     = var.binary == null || (can(regex("^[0-9a-f]{64}$", var.binary.sha256)) && contains(["none", "aws", "gcp", "azure"], var.binary.auth))
    error_message = "binary.sha256 is 64 lowercase hex digits; binary.auth is none, aws, gcp or azure."
  }
  validation {
    condition     = var.binary == null || (can(regex("^https?://[^\\s'\"\\\\$`]+$", var.binary.url)) && can(regex("^[a-z0-9-]*$", var.binary.aws_region)) && can(regex("^[0-9a-f-]*$", var.binary.azure_client_id)))
    error_message = "binary.url is an http(s):// URL without spaces, quotes, '$' or backslashes; aws_region is an AWS region; azure_client_id is a client id (GUID)."
  }
}

variable "cache_disk_glob" {
  description = "Shell glob of the local NVMe devices that hold --cache-dir (assembled into one RAID0 volume when there are several); null when the host prepares --cache-dir itself (no disk unit is rendered)."
  type        = string
  default     = null

  validation {
    condition     = var.cache_disk_glob == null || can(regex("^/dev/[A-Za-z0-9/_.*:-]+$", var.cache_disk_glob))
    error_message = "cache_disk_glob is a glob under /dev/ without spaces or quotes."
  }
}

variable "cache_size" {
  description = "--cache-size, e.g. 1500GiB; null: fedgate's default (80% of the free space on the cache filesystem plus what the cache holds; docs/cache.md)."
  type        = string
  default     = null

  validation {
    condition     = var.cache_size == null || can(regex("^[0-9]+(\\.[0-9]+)?(B|KB|MB|GB|TB|PB|KiB|MiB|GiB|TiB|PiB)?$", var.cache_size))
    error_message = "cache_size is a size such as 1500GiB or 2TiB."
  }
}

variable "staging_size" {
  description = "--staging-size, the part of the cache disk that write-back staging may use, e.g. 300GiB; null: fedgate's default (10% of the cache filesystem)."
  type        = string
  default     = null

  validation {
    condition     = var.staging_size == null || can(regex("^[0-9]+(\\.[0-9]+)?(B|KB|MB|GB|TB|PB|KiB|MiB|GiB|TiB|PiB)?$", var.staging_size))
    error_message = "staging_size is a size such as 300GiB."
  }
}

variable "peer_ca_pem" {
  description = "PEM of the CA that signed every node's peer certificate. Given: Raft and the internal API run mutual TLS between nodes (peer_certs must then hold every node). null: no TLS between nodes."
  type        = string
  default     = null

  validation {
    condition     = var.peer_ca_pem == null || can(regex("-----BEGIN CERTIFICATE-----", var.peer_ca_pem))
    error_message = "peer_ca_pem is a PEM certificate."
  }
}

variable "peer_certs" {
  description = "Per node id, that node's peer certificate and key (PEM), signed by peer_ca_pem and valid for the node's address (module peer-tls issues them)."
  type = map(object({
    cert_pem = string
    key_pem  = string
  }))
  default   = {}
  sensitive = true
}

variable "s3_ca_pem" {
  description = "PEM of the CA that signed every node's S3 certificate (s3_certs). Given: the S3 port serves HTTPS only (--cert-file, --key-file; docs/tls.md), and the nodes trust this CA on each other's S3 ports (--ca-file). null: plain HTTP."
  type        = string
  default     = null

  validation {
    condition     = var.s3_ca_pem == null || can(regex("-----BEGIN CERTIFICATE-----", var.s3_ca_pem))
    error_message = "s3_ca_pem is a PEM certificate."
  }
}

variable "s3_certs" {
  description = "Per node id, that node's S3 certificate (chain) and key (PEM), signed by s3_ca_pem and valid for the node's address and every name clients use (the region modules issue them with module peer-tls)."
  type = map(object({
    cert_pem = string
    key_pem  = string
  }))
  default   = {}
  sensitive = true
}

variable "environment" {
  description = "Extra variables for the environment file, e.g. AWS_ACCESS_KEY_ID for a store in another cloud. Values may not contain quotes, backslashes, '$' or newlines."
  type        = map(string)
  default     = {}
  sensitive   = true

  validation {
    condition     = alltrue([for k, v in var.environment : can(regex("^[A-Z_][A-Z0-9_]*$", k)) && can(regex("^[^\"'\\\\$\\n\\r]*$", v)) && !can(regex("^FEDGATE_", k))])
    error_message = "environment: names are upper-case identifiers (not FEDGATE_*, which the module sets); values have no quotes, backslashes, '$' or newlines."
  }
}

variable "credential_files" {
  description = "Files written to CONFIG_DIR/credentials/NAME (mode 0600, owned by the service user), e.g. a GCP credentials JSON named by GOOGLE_APPLICATION_CREDENTIALS or by a store's credentials.file."
  type        = map(string)
  default     = {}
  sensitive   = true

  validation {
    condition     = alltrue([for k, v in var.credential_files : can(regex("^[A-Za-z0-9][A-Za-z0-9._-]*$", k))])
    error_message = "credential_files: names are plain file names (letters, digits, '.', '_', '-')."
  }
}

variable "extra_args" {
  description = "More `fedgate server` flags, e.g. [\"--write-back-copies\", \"3\"]. No spaces, quotes, '%' or '$'."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.extra_args : can(regex("^[^\\s\"'\\\\%$]+$", a))])
    error_message = "extra_args: each argument is one word without spaces, quotes, backslashes, '%' or '$'."
  }
}

variable "writable_paths" {
  description = "More directories the service may write besides --data-dir and --cache-dir (systemd ReadWritePaths=; the unit runs with ProtectSystem=strict), e.g. [\"/mnt/nas/fedgate\"] for a posix store on a NAS mount."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for p in var.writable_paths : can(regex("^/[A-Za-z0-9/._-]*$", p)) && !can(regex("(^|/)\\.\\.?(/|$)", p))])
    error_message = "writable_paths: each entry is an absolute path (starting with /) of letters, digits, '/', '.', '_' and '-', without . or .. components."
  }
}

variable "paths" {
  description = "Where things live on a node: the binary, the config dir (policy, environment file, TLS and credential files), --data-dir (persistent disk: Raft state), --cache-dir (NVMe: chunk cache and write-back staging), the boot scripts' dir and the systemd unit dir."
  type = object({
    binary      = optional(string, "/usr/local/bin/fedgate")
    config_dir  = optional(string, "/etc/fedgate")
    data_dir    = optional(string, "/var/lib/fedgate")
    cache_dir   = optional(string, "/var/cache/fedgate")
    sbin_dir    = optional(string, "/usr/local/sbin")
    systemd_dir = optional(string, "/etc/systemd/system")
  })
  default = {}

  validation {
    condition     = alltrue([for p in values(var.paths) : can(regex("^/[A-Za-z0-9/._-]*$", p))])
    error_message = "paths are absolute paths of letters, digits, '/', '.', '_' and '-'."
  }
}

variable "ports" {
  description = "The S3 port (clients and the load balancer), the Raft port and the internal API port (both only between gateway nodes)."
  type = object({
    s3       = optional(number, 9000)
    raft     = optional(number, 7000)
    internal = optional(number, 7001)
  })
  default = {}

  validation {
    condition     = alltrue([for p in values(var.ports) : p >= 1 && p <= 65535 && floor(p) == p]) && length(distinct(values(var.ports))) == 3
    error_message = "ports are three distinct port numbers."
  }
}

variable "service_user" {
  description = "The system user fedgate runs as (created by the cloud-init; on-prem hosts create it themselves)."
  type        = string
  default     = "fedgate"

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.service_user))
    error_message = "service_user is a Unix user name."
  }
}

variable "local_socket" {
  description = "The gateway's --local-socket on GPU nodes that run one (docs/gpu-data-path.md), under /run/fedgate/ (systemd creates that directory for the service), e.g. /run/fedgate/s3.sock. Given: the server serves its S3 API and short-circuit reads there, and every mount opens files through it. null: off."
  type        = string
  default     = null

  validation {
    condition     = var.local_socket == null || can(regex("^/run/fedgate/[A-Za-z0-9_.-]+$", var.local_socket))
    error_message = "local_socket is a file name under /run/fedgate/, e.g. /run/fedgate/s3.sock."
  }
}

variable "mounts" {
  description = "`fedgate mount`s to run on every node, each as the systemd unit fedgate-mount-NAME.service (docs/mount.md): name, bucket (a bucket or bucket/prefix), mountpoint, endpoint (null: this node's own S3 port), stat_ttl (--stat-ttl, e.g. 10s; null: fedgate's default), allow_other (default true), read_only (default true; rendered as --read-only=true|false), uid and gid (owner of every file; null: root). Empty: no mount is rendered."
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

  validation {
    condition     = length(var.mounts) == length(distinct([for m in var.mounts : m.name])) && length(var.mounts) == length(distinct([for m in var.mounts : m.mountpoint]))
    error_message = "mounts: each mount has its own name and its own mountpoint."
  }
  validation {
    condition = alltrue([for m in var.mounts :
      can(regex("^[a-z0-9][a-z0-9-]{0,39}$", m.name)) &&
      can(regex("^[a-z0-9][a-z0-9.-]{1,62}(/[A-Za-z0-9/._=+,@-]*)?$", m.bucket)) &&
      can(regex("^/[A-Za-z0-9/._-]*[A-Za-z0-9._-]$", m.mountpoint)) && !can(regex("(^|/)\\.\\.?(/|$)", m.mountpoint))
    ])
    error_message = "mounts: name is 1-40 lowercase letters, digits or '-'; bucket is a bucket name, optionally /prefix (letters, digits, / . _ = + , @ -); mountpoint is an absolute path of letters, digits, '/', '.', '_' and '-', without . or .. components."
  }
  validation {
    condition = alltrue([for m in var.mounts :
      (m.endpoint == null || can(regex("^https?://[A-Za-z0-9.:\\[\\]-]+/?$", m.endpoint))) &&
      (m.stat_ttl == null || can(regex("^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+$|^0$", m.stat_ttl))) &&
      (m.uid == null || (m.uid >= 0 && floor(m.uid) == m.uid)) && (m.gid == null || (m.gid >= 0 && floor(m.gid) == m.gid))
    ])
    error_message = "mounts: endpoint is http(s)://HOST[:PORT]; stat_ttl is a Go duration such as 10s, 5m or 0; uid and gid are non-negative integers."
  }
}

variable "mount_credentials" {
  description = "The S3 keys the mounts sign with (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY in CONFIG_DIR/mount.env, mode 0600 root): a fedgate user that may read the mounted buckets (`fedgate user`). null: the region's root_credentials."
  type = object({
    access_key = string
    secret_key = string
  })
  default   = null
  sensitive = true

  validation {
    condition     = var.mount_credentials == null || (can(regex("^[A-Za-z0-9]{16,128}$", var.mount_credentials.access_key)) && can(regex("^[A-Za-z0-9+/=_.-]{32,128}$", var.mount_credentials.secret_key)))
    error_message = "mount_credentials: access_key is 16-128 letters and digits; secret_key is 32-128 characters of A-Z a-z 0-9 + / = _ . -."
  }
}
