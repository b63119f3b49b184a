output "s3_endpoint" {
  description = "The region's S3 endpoint (the internal load balancer): give it to S3 clients as --endpoint-url."
  value       = "${local.s3_scheme}://${google_compute_address.lb.address}:${module.config.s3_port}"
}

output "node_ids" {
  description = "The Raft node ids, in order (n1, n2, ...)."
  value       = local.ids
}

output "node_addresses" {
  description = "Per node id, its internal IP (its --listen and --raft-addr host)."
  value       = { for id in local.ids : id => google_compute_address.node[id].address }
}

output "identity" {
  description = "The service account the nodes run as: grant it roles on buckets beyond the policy's gcs stores."
  value       = google_service_account.node.email
}

output "identity_id" {
  description = "The service account's resource id (projects/PROJECT/serviceAccounts/EMAIL), e.g. for a key or workload identity binding."
  value       = google_service_account.node.name
}

output "granted_buckets" {
  description = "The GCS buckets the service account has roles/storage.objectUser on: those of the policy's gcs stores."
  value       = local.gcs_buckets
}

output "instance_ids" {
  description = "Per node id, its instance name (for `-replace` during node-by-node upgrades)."
  value       = { for id in local.ids : id => google_compute_instance.node[id].name }
}

output "server_args" {
  description = "Per node id, the `fedgate server` arguments its unit runs."
  value       = module.config.server_args
}
