output "s3_endpoint" {
  description = "The region's S3 endpoint (the internal load balancer): give it to S3 clients as --endpoint-url."
  value       = "${local.s3_scheme}://${azurerm_lb.s3.frontend_ip_configuration[0].private_ip_address}:${module.config.s3_port}"
}

output "node_ids" {
  description = "The Raft node ids, in order (n1, n2, ...)."
  value       = local.ids
}

output "node_addresses" {
  description = "Per node id, its private IP (its --listen and --raft-addr host)."
  value       = { for id in local.ids : id => azurerm_network_interface.node[id].private_ip_address }
}

output "identity" {
  description = "The principal id of the nodes' user-assigned managed identity: assign it roles on containers beyond the policy's azure stores."
  value       = azurerm_user_assigned_identity.node.principal_id
}

output "identity_client_id" {
  description = "The managed identity's client id (AZURE_CLIENT_ID on the nodes)."
  value       = azurerm_user_assigned_identity.node.client_id
}

output "granted_containers" {
  description = "The ACCOUNT/CONTAINER pairs the identity has Storage Blob Data Contributor on: those of the policy's azure stores."
  value       = sort(keys(local.containers))
}

output "instance_ids" {
  description = "Per node id, its VM name (for `-replace` during node-by-node upgrades)."
  value       = { for id in local.ids : id => azurerm_linux_virtual_machine.node[id].name }
}

output "server_args" {
  description = "Per node id, the `fedgate server` arguments its unit runs."
  value       = module.config.server_args
}
