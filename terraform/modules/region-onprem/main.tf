# region-onprem: no cloud provider. Renders, per host, what a fedgate gateway
# node needs (the systemd unit, the environment file, the policy file, and
# the TLS and credential files when asked) and writes them under
# var.output_dir with hashicorp/local, for your own tooling (Ansible, Salt,
# an image build) to place, together with the binary, on hosts whose
# --data-dir (persistent) and --cache-dir (NVMe) it has mounted. See
# docs/deploy.md.

locals {
  # peer_ca is sensitive (its key); whether it is given is not.
  peer_tls = nonsensitive(var.peer_ca != null)
  # Likewise s3_ca: TLS on the S3 port.
  s3_tls    = nonsensitive(var.s3_ca != null)
  s3_scheme = local.s3_tls ? "https" : "http"
}

module "peer_tls" {
  source = "../peer-tls"
  count  = local.peer_tls ? 1 : 0

  name        = substr(replace(var.region, "_", "-"), 0, 41)
  nodes       = var.hosts
  ca_cert_pem = var.peer_ca.cert_pem
  ca_key_pem  = var.peer_ca.key_pem
}

# The S3 port's certificates: the same module, the S3 CA, and the names
# clients reach the region at.
module "s3_tls" {
  source = "../peer-tls"
  count  = local.s3_tls ? 1 : 0

  name        = substr(replace(var.region, "_", "-"), 0, 41)
  nodes       = var.hosts
  extra_names = concat(try([regex("^https?://([^:/]+)", var.s3_endpoint)[0]], []), var.s3_names)
  ca_cert_pem = var.s3_ca.cert_pem
  ca_key_pem  = var.s3_ca.key_pem
}

module "config" {
  source = "../node-config"

  region           = var.region
  policy           = var.policy
  nodes            = [for h in var.hosts : { id = h.id, address = h.address }]
  root_credentials = var.root_credentials
  paths            = var.paths
  service_user     = var.service_user
  cache_size       = var.cache_size
  staging_size     = var.staging_size
  peer_ca_pem      = local.peer_tls ? nonsensitive(var.peer_ca.cert_pem) : null
  peer_certs       = local.peer_tls ? module.peer_tls[0].certs : {}
  s3_ca_pem        = local.s3_tls ? nonsensitive(var.s3_ca.cert_pem) : null
  s3_certs         = local.s3_tls ? module.s3_tls[0].certs : {}
  environment      = var.environment
  credential_files = var.credential_files
  extra_args       = var.extra_args
  writable_paths   = var.writable_paths
  # GPU hosts that run a gateway and mount its buckets (docs/deploy.md).
  local_socket      = var.local_socket
  mounts            = var.mounts
  mount_credentials = var.mount_credentials
}

locals {
  # "HOST/PATH" => the file; the secret ones (mode 0600) separately.
  files = nonsensitive({ for f in flatten([for id, fs in module.config.files : [for f in fs : merge(f, { host = id })]]) :
    "${f.host}${f.path}" => { mode = f.mode, secret = f.mode == "0600" }
  })
  contents = { for f in flatten([for id, fs in module.config.files : [for f in fs : merge(f, { host = id })]]) :
    "${f.host}${f.path}" => f.content
  }
}

resource "local_file" "public" {
  for_each        = { for k, f in local.files : k => f if !f.secret }
  filename        = "${var.output_dir}/${each.key}"
  content         = local.contents[each.key]
  file_permission = each.value.mode
}

resource "local_sensitive_file" "secret" {
  for_each        = { for k, f in local.files : k => f if f.secret }
  filename        = "${var.output_dir}/${each.key}"
  content         = local.contents[each.key]
  file_permission = each.value.mode
}
