variable "name" {
  description = "Prefix for the names of everything this module creates, e.g. fedgate-eus."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,22}[a-z0-9]$", var.name))
    error_message = "name is 2-24 lowercase letters, digits or '-', starting with a letter."
  }
}

variable "region" {
  description = "The fedgate region these nodes serve: a region declared in the policy file (its location must be in this module's cloud)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$", var.region))
    error_message = "region is a region name of the policy file: 1-63 lowercase letters, digits, '-' or '_'."
  }
}

variable "policy" {
  description = "The policy file's YAML text, the same for every region (docs/policies.md). Its defaults.store must be a shared store (a cloud bucket)."
  type        = string

  validation {
    condition     = can(yamldecode(var.policy).regions)
    error_message = "policy is the YAML text of a policy file with regions (docs/policies.md)."
  }
}

variable "node_count" {
  description = "Gateway nodes in the region: 3 (survives one node failure) or 5 (survives two)."
  type        = number
  default     = 3

  validation {
    condition     = contains([3, 5], var.node_count)
    error_message = "node_count is 3 or 5."
  }
}

variable "gpu_cidrs" {
  description = "CIDR blocks of the GPU nodes (and tools) allowed to reach the S3 port; nothing else reaches the gateway nodes."
  type        = list(string)

  validation {
    condition     = length(var.gpu_cidrs) > 0 && alltrue([for c in var.gpu_cidrs : can(cidrhost(c, 0))])
    error_message = "gpu_cidrs is a non-empty list of IPv4 CIDR blocks."
  }
}

variable "root_credentials" {
  description = "The region's root S3 keys, the same on every node: access_key (16-128 letters and digits) and secret_key (32-128 characters). They reach the nodes through user-data and the environment file, never the unit."
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

variable "fedgate_binary" {
  description = "The fedgate binary each node installs at first boot (linux/amd64): url, an https:// URL (a public URL or one with a SAS token), or, with use_managed_identity, a blob URL https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB read with the nodes' managed identity (which gets Storage Blob Data Reader on that container); and its sha256, checked before it is installed."
  type = object({
    url                  = string
    sha256               = string
    use_managed_identity = optional(bool, false)
  })

  validation {
    condition     = can(regex("^https?://[^\\s'\"$`\\\\]+$", var.fedgate_binary.url)) && can(regex("^[0-9a-f]{64}$", var.fedgate_binary.sha256))
    error_message = "fedgate_binary.url is an https:// URL; fedgate_binary.sha256 is 64 lowercase hex digits."
  }
  validation {
    condition     = !var.fedgate_binary.use_managed_identity || can(regex("^https://[a-z0-9]{3,24}\\.blob\\.core\\.windows\\.net/[a-z0-9-]{3,63}/[^?]+$", var.fedgate_binary.url))
    error_message = "With use_managed_identity, fedgate_binary.url is https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB (no SAS)."
  }
}

variable "cache_size" {
  description = "--cache-size, e.g. 1500GiB; null: 80% of the NVMe volume's free space plus what the cache holds (docs/cache.md)."
  type        = string
  default     = null

  validation {
    condition     = var.cache_size == null || can(regex("^[0-9]+(\\.[0-9]+)?(B|KB|MB|GB|TB|PB|KiB|MiB|GiB|TiB|PiB)?$", var.cache_size))
    error_message = "cache_size is a size such as 1500GiB."
  }
}

variable "staging_size" {
  description = "--staging-size (write-back staging on the NVMe volume), e.g. 300GiB; null: 10% of the NVMe volume."
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
  description = "A CA for the S3 port's certificates, {cert_pem, key_pem} (PEM), the one clients trust (AWS_CA_BUNDLE; docs/tls.md). Given: every node gets a certificate from it (module peer-tls) for its address, the region's endpoint (the load balancer's address) and s3_names, and the S3 port serves HTTPS only; nodes trust it on each other's S3 ports. null: plain HTTP. The key stays in the Terraform state: keep the state encrypted."
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
  description = "Extra variables for the nodes' environment file, e.g. credentials for stores in other clouds."
  type        = map(string)
  default     = {}
  sensitive   = true

  validation {
    condition     = alltrue([for k, v in var.environment : can(regex("^[A-Z_][A-Z0-9_]*$", k)) && !can(regex("^FEDGATE_", k))])
    error_message = "environment: names are upper-case identifiers, not FEDGATE_* (the module sets those)."
  }
}

variable "credential_files" {
  description = "Files written to /etc/fedgate/credentials/NAME on every node (mode 0600, owned by the service user), e.g. a GCP credentials JSON."
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

variable "resource_group_name" {
  description = "The resource group everything is created in."
  type        = string
}

variable "location" {
  description = "The Azure region, e.g. eastus."
  type        = string
}

variable "subnet_id" {
  description = "The subnet (of the GPU nodes' virtual network) the nodes and the internal load balancer get addresses in. It needs outbound access (a NAT gateway) for the stores and the binary's URL: VMs behind an internal Standard load balancer have no default outbound access."
  type        = string
}

variable "zones" {
  description = "Availability zones the nodes are spread over, in order; [] for a region without zones."
  type        = list(string)
  default     = ["1", "2", "3"]
}

variable "vm_size" {
  description = "A VM size with local NVMe disks (Lsv3, Lasv3, Lsv4, ...): the cache and write-back staging live there."
  type        = string
  default     = "Standard_L8s_v3"

  validation {
    condition     = can(regex("^Standard_L[0-9]+a?s_v[3-9]$", var.vm_size))
    error_message = "vm_size is an L-series size with local NVMe, such as Standard_L8s_v3 or Standard_L16as_v3."
  }
}

variable "admin_username" {
  description = "The VMs' admin user (SSH key only)."
  type        = string
  default     = "fedgateadmin"
}

variable "admin_ssh_public_key" {
  description = "The admin user's SSH public key (Azure requires one for Linux VMs)."
  type        = string
}

variable "image" {
  description = "The VM image (cloud-init, systemd, curl, mdadm). Changes reach a node only when it is replaced."
  type = object({
    publisher = string
    offer     = string
    sku       = string
    version   = string
  })
  default = {
    publisher = "Canonical"
    offer     = "ubuntu-24_04-lts"
    sku       = "server"
    version   = "latest"
  }
}

variable "data_disk_size_gb" {
  description = "Size of each node's managed disk for --data-dir (Raft log, snapshots, state)."
  type        = number
  default     = 64

  validation {
    condition     = var.data_disk_size_gb >= 10
    error_message = "data_disk_size_gb is at least 10."
  }
}

variable "tags" {
  description = "Tags for everything this module creates."
  type        = map(string)
  default     = {}
}
