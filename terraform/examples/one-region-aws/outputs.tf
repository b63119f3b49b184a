output "s3_endpoint" {
  description = "The region's S3 endpoint (the internal NLB; reachable from gpu_cidrs)."
  value       = module.aws.s3_endpoint
}

output "region" {
  description = "The fedgate region name of the policy file."
  value       = local.region_name
}

output "node_addresses" {
  description = "Per node id, the gateway node's private IP."
  value       = module.aws.node_addresses
}

output "identity" {
  description = "The IAM role the gateway nodes run as (grant it access to more buckets)."
  value       = module.aws.identity
}

output "fedgate_url" {
  description = "Where the nodes downloaded the fedgate binary from."
  value       = local.fedgate_url
}

output "root_credentials" {
  description = "The region's root S3 keys (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for `aws s3`, and FEDGATE_ACCESS_KEY / FEDGATE_SECRET_KEY for `fedgate cluster status`)."
  value = {
    access_key = random_string.access_key.result
    secret_key = random_password.secret_key.result
  }
  sensitive = true
}

output "policy" {
  description = "The policy file the region applies."
  value       = local.policy
}
