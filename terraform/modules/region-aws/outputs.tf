output "s3_endpoint" {
  description = "The region's S3 endpoint (the internal NLB, or the Route 53 name): give it to S3 clients as --endpoint-url."
  value       = "${local.s3_scheme}://${var.route53 == null ? aws_lb.s3.dns_name : var.route53.name}:${module.config.s3_port}"
}

output "node_ids" {
  description = "The Raft node ids, in order (n1, n2, ...)."
  value       = local.ids
}

output "node_addresses" {
  description = "Per node id, its private IP (its --listen and --raft-addr host)."
  value       = { for id in local.ids : id => aws_network_interface.node[id].private_ip }
}

output "identity" {
  description = "The IAM role the nodes run as: grant it access to buckets beyond the policy's s3 stores."
  value       = aws_iam_role.node.arn
}

output "identity_name" {
  description = "The IAM role's name (for aws_iam_role_policy on extra buckets)."
  value       = aws_iam_role.node.name
}

output "granted_buckets" {
  description = "The S3 buckets the role may read and write: those of the policy's s3 stores."
  value       = local.s3_buckets
}

output "instance_ids" {
  description = "Per node id, its EC2 instance id (for `-replace` during node-by-node upgrades)."
  value       = { for id in local.ids : id => aws_instance.node[id].id }
}

output "security_group_id" {
  description = "The nodes' security group."
  value       = aws_security_group.node.id
}

output "server_args" {
  description = "Per node id, the `fedgate server` arguments its unit runs."
  value       = module.config.server_args
}
