# peer-tls issues every gateway node a certificate for mutual TLS between the
# nodes of a region (Raft and the internal API), signed by a CA the user
# gives. Each certificate carries the node's address as an IP SAN (or DNS SAN
# for a host name), which is what a dialing node verifies, and both extended
# key usages (a node is a TLS server and a client).
#
# The region modules call it a second time, with another CA, for the S3
# port's certificates (s3_ca; docs/tls.md): extra_names then adds the names
# clients reach the region at (the load balancer's name or address).
#
# The private keys are generated here, so they are in the Terraform state
# (and in the nodes' user-data): keep the state encrypted and access to it
# narrow. docs/deploy.md shows how to create the CA.

locals {
  nodes = { for n in var.nodes : n.id => n }

  # extra_names split into IP addresses and DNS names.
  extra_ips   = [for a in var.extra_names : a if can(cidrhost("${a}/32", 0))]
  extra_hosts = [for a in var.extra_names : a if !can(cidrhost("${a}/32", 0))]
}

resource "tls_private_key" "node" {
  for_each = local.nodes

  algorithm   = "ECDSA"
  ecdsa_curve = "P256"
}

resource "tls_cert_request" "node" {
  for_each = local.nodes

  private_key_pem = tls_private_key.node[each.key].private_key_pem
  subject {
    common_name  = "${var.name}-${each.key}"
    organization = "fedgate"
  }
  ip_addresses = distinct(concat(can(cidrhost("${each.value.address}/32", 0)) ? [each.value.address] : [], local.extra_ips))
  dns_names    = distinct(concat(can(cidrhost("${each.value.address}/32", 0)) ? [] : [each.value.address], local.extra_hosts))
}

resource "tls_locally_signed_cert" "node" {
  for_each = local.nodes

  cert_request_pem      = tls_cert_request.node[each.key].cert_request_pem
  ca_private_key_pem    = var.ca_key_pem
  ca_cert_pem           = var.ca_cert_pem
  validity_period_hours = var.validity_hours
  early_renewal_hours   = var.early_renewal_hours
  allowed_uses          = ["digital_signature", "key_encipherment", "server_auth", "client_auth"]
}
