output "certs" {
  description = "Per node id, {cert_pem, key_pem}: the node's certificate and private key (node-config's peer_certs)."
  value = { for id, n in local.nodes : id => {
    cert_pem = tls_locally_signed_cert.node[id].cert_pem
    key_pem  = tls_private_key.node[id].private_key_pem
  } }
  sensitive = true
}

output "ca_cert_pem" {
  description = "The CA certificate (node-config's peer_ca_pem)."
  value       = var.ca_cert_pem
}
