variable "aws_region" {
  description = "The AWS region of the GPU nodes, the gateway nodes and the buckets."
  type        = string
  default     = "us-east-1"
}

variable "vpc_id" {
  description = "The VPC of the GPU nodes."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets of vpc_id (with NAT or an S3 gateway endpoint) for the gateway nodes and the NLB, one per availability zone."
  type        = list(string)
}

variable "gpu_cidrs" {
  description = "CIDR blocks of the GPU nodes (and tools) allowed to reach the S3 endpoint."
  type        = list(string)
}

variable "dataset_bucket" {
  description = "An existing S3 bucket in aws_region that holds the training data; fedgate mounts it read-through as the bucket `datasets`."
  type        = string
}

variable "dataset_prefix" {
  description = "The prefix of the training data in dataset_bucket (ending in '/'; \"\" for the whole bucket)."
  type        = string
  default     = ""

  validation {
    condition     = var.dataset_prefix == "" || can(regex("^([^/]+/)+$", var.dataset_prefix))
    error_message = "dataset_prefix is \"\" or ends with '/'."
  }
}

variable "checkpoint_bucket" {
  description = "Name of the S3 bucket this example creates for checkpoints (written back from the gateways' NVMe) and for buckets created through fedgate's S3 API."
  type        = string
}

variable "fedgate_version" {
  description = "The fedgate release the nodes install, e.g. v0.1.0 (a tag of the repository; docs/deploy.md)."
  type        = string

  validation {
    condition     = can(regex("^v[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.-]+)?$", var.fedgate_version))
    error_message = "fedgate_version is a release tag such as v0.1.0."
  }
}

variable "fedgate_sha256" {
  description = "The sha256 of the release binary for fedgate_arch: its line in the release's SHA256SUMS. Checked on each node before the binary is installed."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.fedgate_sha256))
    error_message = "fedgate_sha256 is 64 lowercase hex digits (from SHA256SUMS)."
  }
}

variable "fedgate_arch" {
  description = "The architecture of instance_type: amd64 (i4i, i7ie, c6id, m6id, r6id, ...) or arm64 (Graviton: i8g, im4gn, ...)."
  type        = string
  default     = "amd64"

  validation {
    condition     = contains(["amd64", "arm64"], var.fedgate_arch)
    error_message = "fedgate_arch is amd64 or arm64."
  }
}

variable "fedgate_download_url" {
  description = "Where the nodes download the binary from; null: the GitHub release of fedgate_version. Give an https:// mirror or s3://BUCKET/KEY (in aws_region) when the nodes cannot reach GitHub."
  type        = string
  default     = null
}

variable "instance_type" {
  description = "The gateway nodes' instance type, with local NVMe instance storage for the cache (its architecture is fedgate_arch)."
  type        = string
  default     = "i4i.2xlarge"
}

variable "node_count" {
  description = "Gateway nodes (3 or 5)."
  type        = number
  default     = 3
}

variable "tags" {
  description = "Tags for everything this example creates (the provider's default_tags)."
  type        = map(string)
  default     = {}
}
