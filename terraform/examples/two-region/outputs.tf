output "aws_s3_endpoint" {
  description = "The AWS region's S3 endpoint (reachable from aws_gpu_cidrs)."
  value       = module.aws.s3_endpoint
}

output "gcp_s3_endpoint" {
  description = "The GCP region's S3 endpoint (reachable from gcp_gpu_cidrs)."
  value       = module.gcp.s3_endpoint
}

output "regions" {
  description = "The fedgate region names of the policy file, per cloud."
  value = {
    aws = local.aws_region_name
    gcp = local.gcp_region_name
  }
}

output "node_addresses" {
  description = "Per cloud, per node id, the node's private IP."
  value = {
    aws = module.aws.node_addresses
    gcp = module.gcp.node_addresses
  }
}

output "identities" {
  description = "Per cloud, the identity the nodes run as (grant it access to more buckets)."
  value = {
    aws = module.aws.identity
    gcp = module.gcp.identity
  }
}

output "root_credentials" {
  description = "Per cloud, the region's root S3 keys (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for `aws s3`, and FEDGATE_ACCESS_KEY / FEDGATE_SECRET_KEY for `fedgate cluster status`)."
  value = {
    aws = { access_key = random_string.access_key["aws"].result, secret_key = random_password.secret_key["aws"].result }
    gcp = { access_key = random_string.access_key["gcp"].result, secret_key = random_password.secret_key["gcp"].result }
  }
  sensitive = true
}

output "policy" {
  description = "The policy file both regions apply."
  value       = local.policy
}
