variable "name" {
  description = "Prefix for the names of everything this module creates, e.g. fedgate-use1."
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
  description = "The fedgate binary each node installs at first boot (linux, the instance type's architecture): url, an https:// URL or s3://BUCKET/KEY (read with the nodes' role, which may read exactly that object; the bucket in this AWS region), and its sha256, checked before it is installed."
  type = object({
    url    = string
    sha256 = string
  })

  validation {
    condition     = can(regex("^(https?|s3)://[^\\s'\"$`\\\\]+$", var.fedgate_binary.url)) && can(regex("^[0-9a-f]{64}$", var.fedgate_binary.sha256))
    error_message = "fedgate_binary.url is an https:// or s3:// URL; fedgate_binary.sha256 is 64 lowercase hex digits."
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
  description = "A CA for the S3 port's certificates, {cert_pem, key_pem} (PEM), the one clients trust (AWS_CA_BUNDLE; docs/tls.md). Given: every node gets a certificate from it (module peer-tls) for its address, the region's endpoint (the load balancer's DNS name, and route53.name) and s3_names, and the S3 port serves HTTPS only; nodes trust it on each other's S3 ports. null: plain HTTP. The key stays in the Terraform state: keep the state encrypted."
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

variable "vpc_id" {
  description = "The VPC the gateway nodes and the load balancer go in (the GPU nodes' VPC, or one routed to it)."
  type        = string

  validation {
    condition     = can(regex("^vpc-[0-9a-f]+$", var.vpc_id))
    error_message = "vpc_id is a VPC id (vpc-...)."
  }
}

variable "subnet_ids" {
  description = "Private subnets of var.vpc_id for the nodes (spread over them in order) and the internal NLB. They need a route to the internet (NAT) or VPC endpoints for S3 and the binary's URL."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) > 0 && alltrue([for s in var.subnet_ids : can(regex("^subnet-[0-9a-f]+$", s))])
    error_message = "subnet_ids is a non-empty list of subnet ids (subnet-...)."
  }
}

variable "instance_type" {
  description = "An instance type with local NVMe instance storage (i4i, i7ie, i8g, im4gn, c6id, m6id, r6id, ...): the cache and write-back staging live there."
  type        = string
  default     = "i4i.2xlarge"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.instance_type))
    error_message = "instance_type is an EC2 instance type such as i4i.2xlarge."
  }
}

variable "ami_id" {
  description = "The AMI (cloud-init, systemd, curl, mdadm); null: the latest Ubuntu 24.04 LTS for the instance type's architecture. Changes reach a node only when it is replaced."
  type        = string
  default     = null
}

variable "data_volume_size_gb" {
  description = "Size of each node's persistent EBS volume for --data-dir (Raft log, snapshots, state)."
  type        = number
  default     = 50

  validation {
    condition     = var.data_volume_size_gb >= 10
    error_message = "data_volume_size_gb is at least 10."
  }
}

variable "key_name" {
  description = "An EC2 key pair for SSH, or null (use Session Manager instead: ssm_access)."
  type        = string
  default     = null
}

variable "ssm_access" {
  description = "Attach AmazonSSMManagedInstanceCore to the nodes' role, for shell access through Session Manager (node-by-node upgrades)."
  type        = bool
  default     = false
}

variable "route53" {
  description = "Optional DNS name for the S3 endpoint: an alias record NAME in the Route 53 zone ZONE_ID pointing at the NLB."
  type = object({
    zone_id = string
    name    = string
  })
  default = null
}

variable "tags" {
  description = "Tags for everything this module creates."
  type        = map(string)
  default     = {}
}
