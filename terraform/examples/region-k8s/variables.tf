variable "kubeconfig" {
  description = "The kubeconfig file of the cluster (the Helm provider does not read KUBECONFIG)."
  type        = string
  default     = "~/.kube/config"
}

variable "kube_context" {
  description = "The kubeconfig context to use; null: its current context."
  type        = string
  default     = null
}

variable "namespace" {
  description = "The namespace of the region."
  type        = string
  default     = "fedgate"
}

variable "replicas" {
  description = "Gateway pods: 1, 3 or 5."
  type        = number
  default     = 3
}

variable "region_name" {
  description = "The fedgate region name in the policy file."
  type        = string
  default     = "k8s-gpu"
}

variable "location" {
  description = "The region's location in the policy file, CLOUD:PLACE, e.g. aws:us-east-1 or onprem:lga1."
  type        = string
}

variable "s3_store_endpoint" {
  description = "The S3 endpoint of the buckets (an S3 service or an on-premises object store), e.g. https://s3.us-east-1.amazonaws.com."
  type        = string
}

variable "dataset_bucket" {
  description = "The existing bucket that holds the training data; fedgate serves it read-through as the bucket `datasets`."
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
  description = "The existing bucket checkpoints are written back to (the bucket `checkpoints`)."
  type        = string
}

variable "store_access_key" {
  description = "The access key id the pods sign their calls to the buckets with."
  type        = string
  sensitive   = true
}

variable "store_secret_key" {
  description = "The secret key of store_access_key."
  type        = string
  sensitive   = true
}

variable "image_repository" {
  description = "The fedgate image repository (your registry's copy of the release image)."
  type        = string
  default     = "fedgate/fedgate"
}

variable "image_tag" {
  description = "The image tag: the release the chart comes from (null: the chart's appVersion)."
  type        = string
  default     = null
}

variable "data_storage_class" {
  description = "The StorageClass of the data volumes (Raft state: a persistent disk); \"\": the cluster's default."
  type        = string
  default     = ""
}

variable "nvme_storage_class" {
  description = "The StorageClass of the cache and staging volumes: local NVMe (a local-volume provisioner's class)."
  type        = string
  default     = "local-nvme"
}

variable "cache_size" {
  description = "The size of each pod's cache volume, a Kubernetes quantity such as 1Ti."
  type        = string
  default     = "1Ti"
}

variable "staging_size" {
  description = "The size of each pod's staging volume, a Kubernetes quantity such as 200Gi."
  type        = string
  default     = "200Gi"
}

variable "staging_size_fedgate" {
  description = "--staging-size: how much of the staging volume fedgate fills (a little below the volume, e.g. 180GiB of 200Gi)."
  type        = string
  default     = "180GiB"
}

variable "mount_credentials_secret" {
  description = "A Secret in the namespace with the S3 keys (access-key, secret-key) of the fedgate user the GPU nodes' mounts sign with (create the user with `fedgate user add` once the region runs); null: no mount DaemonSet yet."
  type        = string
  default     = null
}
