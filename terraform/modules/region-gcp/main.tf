# region-gcp: one fedgate region (3 or 5 gateway nodes) in a GCP VPC, next to
# the GPU nodes: instances with local NVMe SSDs, a persistent disk each for
# the Raft state, an internal TCP load balancer as the region's S3 endpoint,
# firewall rules, and a service account with roles on exactly the GCS buckets
# of the policy's gcs stores. See docs/deploy.md.

locals {
  # peer_ca is sensitive (its key); whether it is given is not.
  peer_tls = nonsensitive(var.peer_ca != null)
  # Likewise s3_ca: TLS on the S3 port.
  s3_tls    = nonsensitive(var.s3_ca != null)
  s3_scheme = local.s3_tls ? "https" : "http"

  ids      = [for i in range(var.node_count) : format("n%d", i + 1)]
  index    = { for i, id in local.ids : id => i }
  zone     = { for id, i in local.index : id => var.zones[i % length(var.zones)] }
  zones    = distinct([for id in local.ids : local.zone[id]])
  policy   = yamldecode(var.policy)
  location = try([for r in local.policy.regions : r.location if r.name == var.region][0], "")

  # The GCS buckets of the policy's gcs stores (not those on an emulator).
  gcs_buckets = sort(distinct([for s in try(local.policy.stores, []) : s.bucket
    if s.kind == "gcs" && try(s.endpoint, null) == null
  ]))

  # fedgate_binary.url: https://... (downloaded as is) or gs://BUCKET/OBJECT
  # (read with the nodes' service account token).
  binary_in_gcs = startswith(var.fedgate_binary.url, "gs://")
  binary_gcs    = local.binary_in_gcs ? regex("^gs://(?P<bucket>[^/]+)/(?P<object>.+)$", var.fedgate_binary.url) : { bucket = "", object = "" }
  binary = {
    url             = local.binary_in_gcs ? "https://storage.googleapis.com/${local.binary_gcs.bucket}/${local.binary_gcs.object}" : var.fedgate_binary.url
    sha256          = var.fedgate_binary.sha256
    auth            = local.binary_in_gcs ? "gcp" : "none"
    aws_region      = ""
    azure_client_id = ""
  }

  labels = merge(var.labels, { fedgate-region = var.region })
  s3     = tostring(module.config.s3_port)
  peers  = [tostring(module.config.s3_port), tostring(module.config.raft_port), tostring(module.config.internal_port)]
}

# ---- identity --------------------------------------------------------------------

resource "google_service_account" "node" {
  project      = var.project
  account_id   = "${substr(var.name, 0, 22)}-fedgate"
  display_name = "fedgate gateway nodes of region ${var.region}"
}

# Least privilege: roles/storage.objectUser (docs/stores.md) on exactly the
# buckets of the policy's gcs stores.
resource "google_storage_bucket_iam_member" "stores" {
  for_each = toset(local.gcs_buckets)
  bucket   = each.value
  role     = "roles/storage.objectUser"
  member   = "serviceAccount:${google_service_account.node.email}"
}

resource "google_storage_bucket_iam_member" "binary" {
  count  = local.binary_in_gcs ? 1 : 0
  bucket = local.binary_gcs.bucket
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.node.email}"

  condition {
    title      = "fedgate-binary-only"
    expression = "resource.name == \"projects/_/buckets/${local.binary_gcs.bucket}/objects/${local.binary_gcs.object}\""
  }
}

# ---- network ---------------------------------------------------------------------

# Fixed internal addresses, reserved before the instances so that every node's
# address is in the others' user-data (--join), and kept when an instance is
# replaced (same --raft-addr).
resource "google_compute_address" "node" {
  for_each     = local.index
  project      = var.project
  region       = var.gcp_region
  name         = "${var.name}-${each.key}"
  address_type = "INTERNAL"
  subnetwork   = var.subnetwork
}

resource "google_compute_address" "lb" {
  project      = var.project
  region       = var.gcp_region
  name         = "${var.name}-s3"
  address_type = "INTERNAL"
  subnetwork   = var.subnetwork
}

# S3 port from the GPU CIDRs and from Google's health checkers.
resource "google_compute_firewall" "s3_clients" {
  project                 = var.project
  name                    = "${var.name}-s3-clients"
  network                 = var.network
  direction               = "INGRESS"
  priority                = 1000
  source_ranges           = concat(var.gpu_cidrs, ["35.191.0.0/16", "130.211.0.0/22"])
  target_service_accounts = [google_service_account.node.email]

  allow {
    protocol = "tcp"
    ports    = [local.s3]
  }
}

# S3 (join discovery), Raft and internal API between the gateway nodes.
resource "google_compute_firewall" "peers" {
  project                 = var.project
  name                    = "${var.name}-peers"
  network                 = var.network
  direction               = "INGRESS"
  priority                = 1000
  source_service_accounts = [google_service_account.node.email]
  target_service_accounts = [google_service_account.node.email]

  allow {
    protocol = "tcp"
    ports    = local.peers
  }
}

# Everything else is refused, even where a broad allow-internal rule exists.
resource "google_compute_firewall" "deny_others" {
  project                 = var.project
  name                    = "${var.name}-deny-others"
  network                 = var.network
  direction               = "INGRESS"
  priority                = 1100
  source_ranges           = ["0.0.0.0/0"]
  target_service_accounts = [google_service_account.node.email]

  deny {
    protocol = "tcp"
    ports    = local.peers
  }
}

# ---- storage ---------------------------------------------------------------------

# --data-dir (Raft state) on a persistent disk that outlives the instance.
resource "google_compute_disk" "data" {
  for_each = local.index
  project  = var.project
  zone     = local.zone[each.key]
  name     = "${var.name}-${each.key}-data"
  type     = var.data_disk_type
  size     = var.data_disk_size_gb
  labels   = local.labels
}

# ---- nodes -----------------------------------------------------------------------

module "peer_tls" {
  source = "../peer-tls"
  count  = local.peer_tls ? 1 : 0

  name        = var.name
  nodes       = [for id in local.ids : { id = id, address = google_compute_address.node[id].address }]
  ca_cert_pem = var.peer_ca.cert_pem
  ca_key_pem  = var.peer_ca.key_pem
}

# The S3 port's certificates: the same module, the S3 CA, and the names
# clients reach the region at.
module "s3_tls" {
  source = "../peer-tls"
  count  = local.s3_tls ? 1 : 0

  name        = var.name
  nodes       = [for id in local.ids : { id = id, address = google_compute_address.node[id].address }]
  extra_names = concat([google_compute_address.lb.address], var.s3_names)
  ca_cert_pem = var.s3_ca.cert_pem
  ca_key_pem  = var.s3_ca.key_pem
}

module "config" {
  source = "../node-config"

  region = var.region
  policy = var.policy
  nodes = [for id in local.ids : {
    id        = id
    address   = google_compute_address.node[id].address
    data_disk = "/dev/disk/by-id/google-fedgate-data"
  }]
  root_credentials = var.root_credentials
  binary           = local.binary
  cache_disk_glob  = "/dev/disk/by-id/google-local-nvme-ssd-*"
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
}

resource "google_compute_instance" "node" {
  for_each                  = local.index
  project                   = var.project
  zone                      = local.zone[each.key]
  name                      = "${var.name}-${each.key}"
  machine_type              = var.machine_type
  allow_stopping_for_update = true
  labels                    = merge(local.labels, { fedgate-node = each.key })

  boot_disk {
    initialize_params {
      image = var.image
      size  = 30
      type  = "pd-balanced"
    }
  }

  dynamic "scratch_disk" {
    for_each = range(var.local_ssd_count)
    content {
      interface = "NVME"
    }
  }

  attached_disk {
    source      = google_compute_disk.data[each.key].id
    device_name = "fedgate-data"
  }

  network_interface {
    subnetwork = var.subnetwork
    network_ip = google_compute_address.node[each.key].address
  }

  service_account {
    email  = google_service_account.node.email
    scopes = ["cloud-platform"]
  }

  metadata = {
    user-data              = module.config.cloud_init[each.key]
    enable-oslogin         = "TRUE"
    block-project-ssh-keys = "TRUE"
  }

  shielded_instance_config {
    enable_secure_boot = true
  }

  lifecycle {
    # A changed user-data, image or machine type must not restart or replace
    # every node at once (that would lose every node's NVMe staging
    # together): roll changes out node by node with `-replace`
    # (docs/deploy.md).
    ignore_changes = [metadata["user-data"], boot_disk[0].initialize_params[0].image, machine_type]

    precondition {
      condition     = startswith(local.location, "gcp:")
      error_message = "The policy file must declare region ${var.region} with a gcp: location (it says \"${local.location}\")."
    }
  }
}

# ---- the region's S3 endpoint ------------------------------------------------------

resource "google_compute_instance_group" "node" {
  for_each  = toset(local.zones)
  project   = var.project
  zone      = each.value
  name      = "${var.name}-${each.value}"
  instances = [for id in local.ids : google_compute_instance.node[id].self_link if local.zone[id] == each.value]

  named_port {
    name = "s3"
    port = module.config.s3_port
  }
}

# A node is in service once it has joined, knows a leader and has caught up.
resource "google_compute_region_health_check" "s3" {
  project             = var.project
  region              = var.gcp_region
  name                = "${var.name}-readyz"
  check_interval_sec  = 10
  timeout_sec         = 5
  healthy_threshold   = 2
  unhealthy_threshold = 2

  dynamic "http_health_check" {
    for_each = local.s3_tls ? [] : [1]
    content {
      port         = module.config.s3_port
      request_path = "/_fedgate/readyz"
    }
  }
  # With s3_ca the S3 port serves HTTPS only.
  dynamic "https_health_check" {
    for_each = local.s3_tls ? [1] : []
    content {
      port         = module.config.s3_port
      request_path = "/_fedgate/readyz"
    }
  }
}

resource "google_compute_region_backend_service" "s3" {
  project                         = var.project
  region                          = var.gcp_region
  name                            = "${var.name}-s3"
  protocol                        = "TCP"
  load_balancing_scheme           = "INTERNAL"
  health_checks                   = [google_compute_region_health_check.s3.id]
  connection_draining_timeout_sec = 60

  dynamic "backend" {
    for_each = google_compute_instance_group.node
    content {
      group          = backend.value.id
      balancing_mode = "CONNECTION"
    }
  }
}

resource "google_compute_forwarding_rule" "s3" {
  project               = var.project
  region                = var.gcp_region
  name                  = "${var.name}-s3"
  load_balancing_scheme = "INTERNAL"
  backend_service       = google_compute_region_backend_service.s3.id
  ip_address            = google_compute_address.lb.address
  ip_protocol           = "TCP"
  ports                 = [local.s3]
  network               = var.network
  subnetwork            = var.subnetwork
}
