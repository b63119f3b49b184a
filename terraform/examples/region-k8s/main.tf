# One fedgate region on a Kubernetes cluster that runs GPU nodes: three
# gateway pods on nodes with local NVMe (a local-volume StorageClass), an
# S3 Service inside the cluster, and `fedgate mount` on every GPU node.
# docs/deploy.md ("region-k8s") walks through it; docs/kubernetes.md
# documents the chart it installs.

locals {
  policy = templatefile("${path.module}/policy.yaml.tftpl", {
    region_name       = var.region_name
    location          = var.location
    s3_store_endpoint = var.s3_store_endpoint
    dataset_bucket    = var.dataset_bucket
    dataset_prefix    = var.dataset_prefix
    checkpoint_bucket = var.checkpoint_bucket
  })
}

module "region" {
  source = "../../modules/region-k8s"

  namespace    = var.namespace
  release_name = "fedgate"
  replicas     = var.replicas
  region       = var.region_name
  policy       = local.policy

  image = {
    repository = var.image_repository
    tag        = var.image_tag
  }
  storage = {
    data    = { size = "20Gi", storage_class = var.data_storage_class }
    cache   = { size = var.cache_size, storage_class = var.nvme_storage_class }
    staging = { size = var.staging_size, storage_class = var.nvme_storage_class }
  }
  server_config = {
    "staging-size" = var.staging_size_fedgate
    "log-format"   = "json"
  }

  store_credentials = {
    DATASETS_AK = var.store_access_key
    DATASETS_SK = var.store_secret_key
  }

  # The mount needs a fedgate user's keys, which exist only once the region
  # runs: apply once without mount_credentials_secret, then create the user
  # and the Secret (docs/kubernetes.md) and apply again with it.
  local_socket = true
  mount = {
    enabled         = var.mount_credentials_secret != null
    bucket          = "datasets"
    existing_secret = var.mount_credentials_secret
  }
}
