output "s3_endpoint" {
  description = "The region's S3 endpoint: var.s3_endpoint, or the first host's S3 port (https with s3_ca)."
  value       = coalesce(var.s3_endpoint, "${local.s3_scheme}://${var.hosts[0].address}:${module.config.s3_port}")

  precondition {
    condition     = var.s3_endpoint == null || startswith(coalesce(var.s3_endpoint, "-"), "${local.s3_scheme}://")
    error_message = "s3_endpoint must start with ${local.s3_scheme}:// (https exactly when s3_ca is given: the S3 port then serves TLS only)."
  }
}

output "node_ids" {
  description = "The Raft node ids, in order."
  value       = [for h in var.hosts : h.id]
}

output "node_addresses" {
  description = "Per node id, its address (its --listen and --raft-addr host)."
  value       = { for h in var.hosts : h.id => h.address }
}

output "files" {
  description = "Per host id, the files written under var.output_dir/ID: their path on the host, mode and owner."
  value = { for id, fs in nonsensitive(module.config.files) : id => [for f in fs : {
    path  = f.path
    mode  = f.mode
    owner = f.owner
  }] }
}

output "server_args" {
  description = "Per node id, the `fedgate server` arguments its unit runs."
  value       = module.config.server_args
}

output "units" {
  description = "Per node id, the systemd unit fedgate.service."
  value       = module.config.units
}

output "ports" {
  description = "The ports to open: s3 to clients and the load balancer, raft and internal only between the hosts."
  value = {
    s3       = module.config.s3_port
    raft     = module.config.raft_port
    internal = module.config.internal_port
  }
}
