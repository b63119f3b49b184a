output "server_args" {
  description = "Per node id, the `fedgate server` arguments (after the binary's path) that its unit runs."
  value       = local.server_args

  precondition {
    condition     = contains(local.regions, var.region)
    error_message = "The policy file declares no region named var.region (regions: ${join(", ", local.regions)})."
  }
  precondition {
    condition     = try(local.policy.defaults.store, null) != null
    error_message = "A region of several nodes needs a shared default store: set defaults.store in the policy file to a cloud bucket or a NAS path mounted on every node."
  }
  precondition {
    condition     = var.peer_ca_pem == null || length(setsubtract([for n in var.nodes : n.id], keys(var.peer_certs))) == 0
    error_message = "peer_ca_pem is given, so peer_certs needs a certificate and key for every node id."
  }
  precondition {
    condition     = var.s3_ca_pem == null || length(setsubtract([for n in var.nodes : n.id], keys(var.s3_certs))) == 0
    error_message = "s3_ca_pem is given, so s3_certs needs a certificate and key for every node id."
  }
}

output "units" {
  description = "Per node id, the systemd unit fedgate.service."
  value       = local.units
}

output "files" {
  description = "Per node id, the files the node needs wherever it runs (unit, environment file, policy, TLS and credential files): a list of {path, content, mode, owner}."
  value       = local.files
  sensitive   = true
}

output "cloud_init" {
  description = "Per node id, the cloud-init user-data: installs the binary (sha256 checked), writes the files, prepares the disks at every boot and starts fedgate. Empty when var.binary is null."
  value       = local.cloud_init
  sensitive   = true
}

output "install_script" {
  description = "The script that downloads the fedgate binary and checks its sha256 before installing it (null when var.binary is null)."
  value       = local.install_script
}

output "region_location" {
  description = "The location (cloud:region) the policy file gives var.region, or null."
  value       = try([for r in local.policy.regions : r.location if r.name == var.region][0], null)
}

output "s3_port" {
  description = "The S3 port every node listens on (clients and the load balancer health check GET /_fedgate/readyz)."
  value       = var.ports.s3
}

output "raft_port" {
  description = "The Raft port (open only between gateway nodes)."
  value       = var.ports.raft
}

output "internal_port" {
  description = "The internal API port (open only between gateway nodes)."
  value       = var.ports.internal
}
