# One fedgate GPU region on AWS: three gateway nodes behind an internal NLB,
# serving an existing S3 dataset bucket read-through from their NVMe cache,
# and a checkpoint bucket this example creates, written back from NVMe.
# docs/deploy.md walks through it; examples/two-region adds a second cloud.

locals {
  region_name = "${var.aws_region}-gpu"

  policy = templatefile("${path.module}/policy.yaml.tftpl", {
    region_name       = local.region_name
    aws_region        = var.aws_region
    dataset_bucket    = var.dataset_bucket
    dataset_prefix    = var.dataset_prefix
    checkpoint_bucket = var.checkpoint_bucket
  })

  # The release's binary for the instances' architecture (docs/deploy.md,
  # "Releases"), unless a mirror is given.
  fedgate_url = coalesce(var.fedgate_download_url,
  "https://github.com/fedgate/fedgate/releases/download/${var.fedgate_version}/fedgate_${var.fedgate_version}_linux_${var.fedgate_arch}")
}

resource "aws_s3_bucket" "checkpoints" {
  bucket = var.checkpoint_bucket
}

resource "aws_s3_bucket_public_access_block" "checkpoints" {
  bucket                  = aws_s3_bucket.checkpoints.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# The region's root S3 keys and the CA of its peers' mutual TLS.
resource "random_string" "access_key" {
  length  = 20
  lower   = false
  special = false
}

resource "random_password" "secret_key" {
  length  = 40
  special = false
}

resource "tls_private_key" "peer_ca" {
  algorithm   = "ECDSA"
  ecdsa_curve = "P256"
}

resource "tls_self_signed_cert" "peer_ca" {
  private_key_pem       = tls_private_key.peer_ca.private_key_pem
  is_ca_certificate     = true
  validity_period_hours = 87600
  allowed_uses          = ["cert_signing", "crl_signing"]

  subject {
    common_name  = "fedgate peers ${local.region_name}"
    organization = "fedgate"
  }
}

module "aws" {
  source = "../../modules/region-aws"

  name          = "fedgate-${var.aws_region}"
  region        = local.region_name
  policy        = local.policy
  node_count    = var.node_count
  vpc_id        = var.vpc_id
  subnet_ids    = var.subnet_ids
  gpu_cidrs     = var.gpu_cidrs
  instance_type = var.instance_type
  root_credentials = {
    access_key = random_string.access_key.result
    secret_key = random_password.secret_key.result
  }
  fedgate_binary = {
    url    = local.fedgate_url
    sha256 = var.fedgate_sha256
  }
  peer_ca = {
    cert_pem = tls_self_signed_cert.peer_ca.cert_pem
    key_pem  = tls_private_key.peer_ca.private_key_pem
  }

  depends_on = [aws_s3_bucket.checkpoints]
}
