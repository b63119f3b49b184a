output "s3_endpoint" {
  description = "The region's S3 endpoint inside the cluster."
  value       = module.region.s3_endpoint
}

output "s3_service" {
  description = "The S3 Service's name (kubectl port-forward svc/NAME 9000 to reach it from outside)."
  value       = module.region.s3_service
}

output "namespace" {
  description = "The namespace of the region."
  value       = module.region.namespace
}

output "release" {
  description = "The Helm release: name, chart version, app version and revision."
  value       = module.region.release
}

output "policy" {
  description = "The policy file the region seeds with."
  value       = local.policy
}
