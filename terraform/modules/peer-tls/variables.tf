variable "name" {
  description = "A name for the region's certificates (their common names are NAME-NODEID)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,40}$", var.name))
    error_message = "name is 1-41 lowercase letters, digits or '-'."
  }
}

variable "nodes" {
  description = "Every node of the region: id and address (an IPv4 address, which becomes an IP SAN, or a host name, a DNS SAN)."
  type = list(object({
    id      = string
    address = string
  }))
}

variable "extra_names" {
  description = "More names every certificate carries besides its node's address: IPv4 addresses (IP SANs) and host names (DNS SANs), e.g. the S3 endpoint's load balancer name. Empty for peer certificates."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.extra_names : can(regex("^[A-Za-z0-9.*-]+$", a))])
    error_message = "extra_names are IPv4 addresses or host names (a leading *. for a wildcard)."
  }
}

variable "ca_cert_pem" {
  description = "PEM of the CA certificate dedicated to this region's peers (any certificate it signed can join the Raft traffic), or, for the S3 port's certificates, the CA clients trust."
  type        = string

  validation {
    condition     = can(regex("-----BEGIN CERTIFICATE-----", var.ca_cert_pem))
    error_message = "ca_cert_pem is a PEM certificate."
  }
}

variable "ca_key_pem" {
  description = "PEM of the CA's private key."
  type        = string
  sensitive   = true
}

variable "validity_hours" {
  description = "How long each node certificate is valid."
  type        = number
  default     = 17520

  validation {
    condition     = var.validity_hours >= 720
    error_message = "validity_hours is at least 720 (30 days)."
  }
}

variable "early_renewal_hours" {
  description = "How long before expiry an apply issues new certificates (a node picks them up when it is replaced; see docs/deploy.md)."
  type        = number
  default     = 2160
}
