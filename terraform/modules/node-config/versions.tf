terraform {
  # Optional object attributes with defaults (1.3), output preconditions.
  # Works with Terraform and OpenTofu alike.
  required_version = ">= 1.5.0"
}
