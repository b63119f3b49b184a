# tflint configuration for every module and example under terraform/
# (internal/deploycheck runs `tflint --recursive` with this file).
# Only the bundled terraform ruleset: the aws, google and azurerm rulesets
# are plugins that must be downloaded, which the offline checks cannot do.
config {
  call_module_type = "local"
}

plugin "terraform" {
  enabled = true
  preset  = "all"
}
