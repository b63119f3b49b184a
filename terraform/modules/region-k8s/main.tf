# One fedgate region on Kubernetes: the chart deploy/helm/fedgate installed
# with the Helm provider (docs/deploy.md, "region-k8s"; the chart's values
# are documented in docs/kubernetes.md). Everything the inputs set is in
# local.values, named exactly as the chart's values.yaml names it (the
# offline checks compare the two); fields left null are left out, so the
# chart's defaults apply (a null in Helm values would delete the default).

locals {
  # The chart of the checkout this module comes from: a git source pinned
  # with ?ref= brings deploy/helm/fedgate of the same release.
  chart = coalesce(var.chart, "${path.module}/../../../deploy/helm/fedgate")

  fullname  = var.release_name
  s3_scheme = var.tls == null ? "http" : "https"

  storage = { for name, v in {
    data    = var.storage.data
    cache   = var.storage.cache
    staging = var.storage.staging
    } : name => { for k, x in {
      size         = v.size
      storageClass = v.storage_class
      hostPath     = v.host_path
  } : k => x if x != null } }

  persistence = merge(
    var.storage.mode == null ? {} : { mode = var.storage.mode },
    { for name, v in local.storage : name => v if length(v) > 0 },
  )

  image = { for k, x in {
    repository = var.image.repository
    tag        = var.image.tag
    pullPolicy = var.image.pull_policy
  } : k => x if x != null }

  service = merge(
    { type = var.service.type },
    length(var.service.annotations) == 0 ? {} : { annotations = var.service.annotations },
    length(var.service.load_balancer_source_ranges) == 0 ? {} : { loadBalancerSourceRanges = var.service.load_balancer_source_ranges },
    var.service.external_traffic_policy == null ? {} : { externalTrafficPolicy = var.service.external_traffic_policy },
  )

  # Each conditional gives {} or one attribute, so that Terraform can
  # unify its two results (objects of different attributes cannot be).
  tls = merge(
    { enabled = var.tls != null },
    try(var.tls.existing_secret, null) == null ? {} : { existingSecret = var.tls.existing_secret },
    try(var.tls.ca_key, null) == null ? {} : { caKey = var.tls.ca_key },
    try(var.tls.cert_manager_issuer, null) == null ? {} : {
      certManager = {
        enabled   = true
        issuerRef = { name = var.tls.cert_manager_issuer.name, kind = var.tls.cert_manager_issuer.kind }
        dnsNames  = var.tls.dns_names
      }
    },
  )

  peer_tls = merge(
    { enabled = var.peer_tls != null },
    try(var.peer_tls.existing_secret, null) == null ? {} : { existingSecret = var.peer_tls.existing_secret },
    try(var.peer_tls.cert_manager_issuer, null) == null ? {} : {
      certManager = {
        enabled   = true
        issuerRef = { name = var.peer_tls.cert_manager_issuer.name, kind = var.peer_tls.cert_manager_issuer.kind }
      }
    },
  )

  anti_affinity = { for k, x in {
    hostname = var.anti_affinity.hostname
    zone     = var.anti_affinity.zone
  } : k => x if x != null }

  resources = var.resources == null ? {} : { for k, x in {
    requests = var.resources.requests
    limits   = var.resources.limits
  } : k => x if x != null }

  mount = merge(
    { enabled = var.mount.enabled },
    { for k, x in {
      nodeSelector   = var.mount.node_selector
      hostPath       = var.mount.host_path
      bucket         = var.mount.bucket
      readOnly       = var.mount.read_only
      endpoint       = var.mount.endpoint
      existingSecret = var.mount.existing_secret
      extraFlags     = var.mount.extra_flags
    } : k => x if x != null },
  )

  # The chart's values (deploy/helm/fedgate/values.yaml) this module sets.
  # Secrets are not here: they go through set_sensitive below.
  values = merge(
    {
      replicas         = var.replicas
      fullnameOverride = local.fullname
      clusterDomain    = var.cluster_domain
      ports            = { s3 = var.s3_port }
      policy           = { content = var.policy }
      service          = local.service
      tls              = local.tls
      peerTLS          = local.peer_tls
      localSocket      = { enabled = var.local_socket }
      metrics = {
        serviceMonitor = merge({ enabled = var.monitoring.service_monitor }, length(var.monitoring.labels) == 0 ? {} : { labels = var.monitoring.labels })
        prometheusRule = merge({ enabled = var.monitoring.prometheus_rule }, length(var.monitoring.labels) == 0 ? {} : { labels = var.monitoring.labels })
      }
      grafanaDashboard = { enabled = var.monitoring.grafana_dashboard }
      mount            = local.mount
    },
    var.region == null ? {} : { region = var.region },
    var.s3_region == null ? {} : { s3Region = var.s3_region },
    var.shutdown_timeout == null ? {} : { shutdownTimeout = var.shutdown_timeout },
    length(keys(var.server_config)) == 0 ? {} : { serverConfig = var.server_config },
    length(local.image) == 0 ? {} : { image = local.image },
    length(var.image_pull_secrets) == 0 ? {} : { imagePullSecrets = [for s in var.image_pull_secrets : { name = s }] },
    length(local.persistence) == 0 ? {} : { persistence = local.persistence },
    length(local.anti_affinity) == 0 ? {} : { antiAffinity = local.anti_affinity },
    length(local.resources) == 0 ? {} : { resources = local.resources },
    length(var.node_selector) == 0 ? {} : { nodeSelector = var.node_selector },
    length(var.tolerations) == 0 ? {} : { tolerations = [for t in var.tolerations : { for k, x in t : k => x if x != null }] },
    var.root_credentials_secret == null ? {} : { rootCredentials = { existingSecret = var.root_credentials_secret } },
    var.store_credentials_secret == null ? {} : { storeCredentials = { existingSecret = var.store_credentials_secret } },
  )

  # Secrets, as helm --set-string: the value's backslashes, commas and
  # braces are escaped so that Helm's --set parser takes it whole (a comma
  # would start another key, a leading { a list).
  sensitive_values = merge(
    var.root_credentials == null ? {} : {
      "rootCredentials.accessKey" = var.root_credentials.access_key
      "rootCredentials.secretKey" = var.root_credentials.secret_key
    },
    { for k, v in var.store_credentials : "storeCredentials.env.${k}" => v },
  )
  set_sensitive = [for k in sort(keys(local.sensitive_values)) : {
    name  = k
    value = replace(local.sensitive_values[k], "/([\\\\,{])/", "\\$1")
    type  = "string"
  }]
}

resource "helm_release" "region" {
  name             = var.release_name
  namespace        = var.namespace
  create_namespace = var.create_namespace
  chart            = local.chart
  repository       = var.chart_repository
  version          = var.chart_version

  values        = concat([yamlencode(local.values)], var.extra_values)
  set_sensitive = local.set_sensitive

  # Wait until every pod is Ready (readiness is /_fedgate/readyz: the pod
  # is in the region and the region has a leader), so that an upgrade only
  # reports success once the region is healthy again.
  wait    = true
  timeout = var.timeout
  atomic  = false
}
