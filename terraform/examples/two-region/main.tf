# Two fedgate GPU regions, one on AWS and one on GCP, applying one policy
# file: the dataset in S3 is mounted in both, checkpoints are erasure-coded
# across both clouds. README.md walks through apply, the first `aws s3 ls`
# against each endpoint, and tear-down.

locals {
  aws_region_name = "${var.aws_region}-gpu"
  gcp_region_name = "${var.gcp_region}-gpu"

  policy = templatefile("${path.module}/policy.yaml.tftpl", {
    aws_region_name       = local.aws_region_name
    gcp_region_name       = local.gcp_region_name
    aws_region            = var.aws_region
    gcp_region            = var.gcp_region
    dataset_bucket        = var.dataset_bucket
    dataset_prefix        = var.dataset_prefix
    s3_checkpoint_bucket  = var.s3_checkpoint_bucket
    gcs_checkpoint_bucket = var.gcs_checkpoint_bucket
  })

  # Where a region's nodes find the credentials for the other cloud's stores.
  gcp_credentials_file = "/etc/fedgate/credentials/gcp-service-account.json"
}

# ---- the checkpoint buckets, one per cloud -------------------------------------------

resource "aws_s3_bucket" "checkpoints" {
  bucket = var.s3_checkpoint_bucket
}

resource "aws_s3_bucket_public_access_block" "checkpoints" {
  bucket                  = aws_s3_bucket.checkpoints.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "google_storage_bucket" "checkpoints" {
  name                        = var.gcs_checkpoint_bucket
  location                    = upper(var.gcp_region)
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
}

# ---- each region's root keys and peer CA ---------------------------------------------

resource "random_string" "access_key" {
  for_each = toset(["aws", "gcp"])
  length   = 20
  lower    = false
  special  = false
}

resource "random_password" "secret_key" {
  for_each = toset(["aws", "gcp"])
  length   = 40
  special  = false
}

resource "tls_private_key" "peer_ca" {
  for_each    = toset(["aws", "gcp"])
  algorithm   = "ECDSA"
  ecdsa_curve = "P256"
}

resource "tls_self_signed_cert" "peer_ca" {
  for_each              = toset(["aws", "gcp"])
  private_key_pem       = tls_private_key.peer_ca[each.key].private_key_pem
  is_ca_certificate     = true
  validity_period_hours = 87600
  allowed_uses          = ["cert_signing", "crl_signing"]

  subject {
    common_name  = "fedgate peers ${each.key}"
    organization = "fedgate"
  }
}

# ---- cross-cloud credentials -----------------------------------------------------------

# The GCP region reaches the S3 stores with an IAM user's keys (AWS_* in its
# environment file): read-write on exactly the two S3 buckets.
resource "aws_iam_user" "gcp_region" {
  name = "fedgate-${local.gcp_region_name}"
}

data "aws_iam_policy_document" "gcp_region" {
  statement {
    actions   = ["s3:ListBucket", "s3:ListBucketMultipartUploads"]
    resources = [for b in [var.dataset_bucket, var.s3_checkpoint_bucket] : "arn:aws:s3:::${b}"]
  }
  statement {
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]
    resources = [for b in [var.dataset_bucket, var.s3_checkpoint_bucket] : "arn:aws:s3:::${b}/*"]
  }
}

resource "aws_iam_user_policy" "gcp_region" {
  name   = "fedgate-stores"
  user   = aws_iam_user.gcp_region.name
  policy = data.aws_iam_policy_document.gcp_region.json
}

resource "aws_iam_access_key" "gcp_region" {
  user = aws_iam_user.gcp_region.name
}

# The AWS region reaches the GCS store as the GCP region's service account
# (which has roles/storage.objectUser on exactly the GCS bucket), through a
# key file. Where keys are forbidden, use workload identity federation with
# an AWS provider instead (docs/deploy.md).
resource "google_service_account_key" "aws_region" {
  service_account_id = module.gcp.identity_id
}

# ---- the regions ---------------------------------------------------------------------------

module "aws" {
  source = "../../modules/region-aws"

  name       = "fedgate-aws"
  region     = local.aws_region_name
  policy     = local.policy
  node_count = var.node_count
  vpc_id     = var.aws_vpc_id
  subnet_ids = var.aws_subnet_ids
  gpu_cidrs  = var.aws_gpu_cidrs
  root_credentials = {
    access_key = random_string.access_key["aws"].result
    secret_key = random_password.secret_key["aws"].result
  }
  fedgate_binary = var.fedgate_binary
  peer_ca = {
    cert_pem = tls_self_signed_cert.peer_ca["aws"].cert_pem
    key_pem  = tls_private_key.peer_ca["aws"].private_key_pem
  }
  environment = {
    GOOGLE_APPLICATION_CREDENTIALS = local.gcp_credentials_file
  }
  credential_files = {
    "gcp-service-account.json" = base64decode(google_service_account_key.aws_region.private_key)
  }

  depends_on = [aws_s3_bucket.checkpoints, google_storage_bucket.checkpoints]
}

module "gcp" {
  source = "../../modules/region-gcp"

  name       = "fedgate-gcp"
  region     = local.gcp_region_name
  policy     = local.policy
  node_count = var.node_count
  project    = var.gcp_project
  gcp_region = var.gcp_region
  zones      = var.gcp_zones
  network    = var.gcp_network
  subnetwork = var.gcp_subnetwork
  gpu_cidrs  = var.gcp_gpu_cidrs
  root_credentials = {
    access_key = random_string.access_key["gcp"].result
    secret_key = random_password.secret_key["gcp"].result
  }
  fedgate_binary = var.fedgate_binary
  peer_ca = {
    cert_pem = tls_self_signed_cert.peer_ca["gcp"].cert_pem
    key_pem  = tls_private_key.peer_ca["gcp"].private_key_pem
  }
  environment = {
    AWS_ACCESS_KEY_ID     = aws_iam_access_key.gcp_region.id
    AWS_SECRET_ACCESS_KEY = aws_iam_access_key.gcp_region.secret
  }

  depends_on = [aws_s3_bucket.checkpoints, google_storage_bucket.checkpoints]
}
