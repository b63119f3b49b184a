output "namespace" {
  description = "The namespace the region runs in."
  value       = helm_release.region.namespace
}

output "release" {
  description = "The Helm release: name, chart version, app version (the fedgate release) and revision."
  value = {
    name        = helm_release.region.name
    chart       = helm_release.region.metadata.chart
    version     = helm_release.region.metadata.version
    app_version = helm_release.region.metadata.app_version
    revision    = helm_release.region.metadata.revision
  }
}

output "s3_service" {
  description = "The name of the S3 Service clients reach (the release name: the module sets the chart's fullnameOverride to it)."
  value       = local.fullname

  precondition {
    condition     = var.root_credentials == null || var.root_credentials_secret == null
    error_message = "give root_credentials or root_credentials_secret, not both."
  }
  precondition {
    condition     = length(var.store_credentials) == 0 || var.store_credentials_secret == null
    error_message = "give store_credentials or store_credentials_secret, not both."
  }
  precondition {
    condition     = var.chart_repository == null || var.chart_version != null
    error_message = "chart_repository needs chart_version: pin the chart to the fedgate release the region runs."
  }
}

output "headless_service" {
  description = "The headless Service of the gateway pods (Raft and the internal API; pod i is RELEASE-i.RELEASE-nodes.NAMESPACE.svc.CLUSTER_DOMAIN)."
  value       = "${local.fullname}-nodes"
}

output "s3_endpoint" {
  description = "The region's S3 endpoint inside the cluster: http(s)://SERVICE.NAMESPACE.svc.CLUSTER_DOMAIN:PORT (https with tls)."
  value       = "${local.s3_scheme}://${local.fullname}.${var.namespace}.svc.${var.cluster_domain}:${var.s3_port}"
}
