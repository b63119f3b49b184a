variable "aws_region" {
  description = "The AWS region of the AWS GPU region (and of the dataset and checkpoint buckets in S3)."
  type        = string
  default     = "us-east-1"
}

variable "aws_vpc_id" {
  description = "The VPC of the AWS GPU nodes."
  type        = string
}

variable "aws_subnet_ids" {
  description = "Private subnets of aws_vpc_id (with NAT) for the gateway nodes and the NLB."
  type        = list(string)
}

variable "aws_gpu_cidrs" {
  description = "CIDR blocks of the AWS GPU nodes."
  type        = list(string)
}

variable "gcp_project" {
  description = "The GCP project of the GCP GPU region."
  type        = string
}

variable "gcp_region" {
  description = "The GCP region of the GCP GPU region (and of the checkpoint bucket in GCS)."
  type        = string
  default     = "us-central1"
}

variable "gcp_zones" {
  description = "Zones of gcp_region the GCP gateway nodes are spread over."
  type        = list(string)
  default     = ["us-central1-a", "us-central1-b", "us-central1-c"]
}

variable "gcp_network" {
  description = "The VPC network of the GCP GPU nodes."
  type        = string
}

variable "gcp_subnetwork" {
  description = "The subnetwork (self link, in gcp_region, with Cloud NAT) for the GCP gateway nodes and the load balancer."
  type        = string
}

variable "gcp_gpu_cidrs" {
  description = "CIDR blocks of the GCP GPU nodes."
  type        = list(string)
}

variable "dataset_bucket" {
  description = "An existing S3 bucket (in aws_region) that holds the training data; both regions mount it read-through."
  type        = string
}

variable "dataset_prefix" {
  description = "The prefix of the dataset in dataset_bucket, mounted as the bucket `imagenet` in both regions."
  type        = string
  default     = "imagenet/"

  validation {
    condition     = can(regex("^([^/]+/)+$", var.dataset_prefix))
    error_message = "dataset_prefix ends with '/'."
  }
}

variable "s3_checkpoint_bucket" {
  description = "Name of the S3 bucket this example creates for checkpoint shards (and buckets created through S3)."
  type        = string
}

variable "gcs_checkpoint_bucket" {
  description = "Name of the GCS bucket this example creates for checkpoint shards."
  type        = string
}

variable "fedgate_binary" {
  description = "The fedgate linux/amd64 binary both regions install: an https:// URL (or s3:// for the AWS region only) and its sha256."
  type = object({
    url    = string
    sha256 = string
  })
}

variable "node_count" {
  description = "Gateway nodes per region (3 or 5)."
  type        = number
  default     = 3
}
