# region-azure: one fedgate region (3 or 5 gateway nodes) in an Azure virtual
# network, next to the GPU nodes: L-series VMs with local NVMe, a managed disk
# each for the Raft state, an internal Standard load balancer as the region's
# S3 endpoint, an NSG, and a user-assigned managed identity with Storage Blob
# Data Contributor on exactly the containers of the policy's azure stores.
# See docs/deploy.md.

locals {
  # peer_ca is sensitive (its key); whether it is given is not.
  peer_tls = nonsensitive(var.peer_ca != null)
  # Likewise s3_ca: TLS on the S3 port.
  s3_tls    = nonsensitive(var.s3_ca != null)
  s3_scheme = local.s3_tls ? "https" : "http"

  ids      = [for i in range(var.node_count) : format("n%d", i + 1)]
  index    = { for i, id in local.ids : id => i }
  zone     = { for id, i in local.index : id => length(var.zones) == 0 ? null : var.zones[i % length(var.zones)] }
  policy   = yamldecode(var.policy)
  location = try([for r in local.policy.regions : r.location if r.name == var.region][0], "")

  # The containers of the policy's azure stores (not those on an emulator),
  # keyed "ACCOUNT/CONTAINER".
  containers = { for s in try(local.policy.stores, []) : "${s.account}/${s.container}" => {
    account   = s.account
    container = s.container
  } if s.kind == "azure" && try(s.endpoint, null) == null }

  binary_blob = var.fedgate_binary.use_managed_identity ? regex("^https://(?P<account>[a-z0-9]+)\\.blob\\.core\\.windows\\.net/(?P<container>[a-z0-9-]+)/", var.fedgate_binary.url) : { account = "", container = "" }
  accounts    = toset(concat([for c in values(local.containers) : c.account], var.fedgate_binary.use_managed_identity ? [local.binary_blob.account] : []))

  binary = {
    url             = var.fedgate_binary.url
    sha256          = var.fedgate_binary.sha256
    auth            = var.fedgate_binary.use_managed_identity ? "azure" : "none"
    aws_region      = ""
    azure_client_id = azurerm_user_assigned_identity.node.client_id
  }

  tags  = merge(var.tags, { "fedgate-region" = var.region })
  s3    = tostring(module.config.s3_port)
  peers = [tostring(module.config.s3_port), tostring(module.config.raft_port), tostring(module.config.internal_port)]
}

# ---- identity --------------------------------------------------------------------

resource "azurerm_user_assigned_identity" "node" {
  name                = "${var.name}-fedgate"
  resource_group_name = var.resource_group_name
  location            = var.location
  tags                = local.tags
}

# The storage accounts of those containers, wherever their resource group.
data "azurerm_resources" "account" {
  for_each = local.accounts
  type     = "Microsoft.Storage/storageAccounts"
  name     = each.value
}

# Least privilege: Storage Blob Data Contributor (docs/stores.md) scoped to
# exactly the containers of the policy's azure stores.
resource "azurerm_role_assignment" "stores" {
  for_each             = local.containers
  scope                = "${data.azurerm_resources.account[each.value.account].resources[0].id}/blobServices/default/containers/${each.value.container}"
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = azurerm_user_assigned_identity.node.principal_id
  principal_type       = "ServicePrincipal"
}

resource "azurerm_role_assignment" "binary" {
  count                = var.fedgate_binary.use_managed_identity ? 1 : 0
  scope                = "${data.azurerm_resources.account[local.binary_blob.account].resources[0].id}/blobServices/default/containers/${local.binary_blob.container}"
  role_definition_name = "Storage Blob Data Reader"
  principal_id         = azurerm_user_assigned_identity.node.principal_id
  principal_type       = "ServicePrincipal"
}

# ---- network ---------------------------------------------------------------------

resource "azurerm_application_security_group" "node" {
  name                = "${var.name}-nodes"
  resource_group_name = var.resource_group_name
  location            = var.location
  tags                = local.tags
}

resource "azurerm_network_security_group" "node" {
  name                = "${var.name}-nodes"
  resource_group_name = var.resource_group_name
  location            = var.location
  tags                = local.tags
}

resource "azurerm_network_security_rule" "s3_gpu" {
  name                                       = "fedgate-s3-from-gpu"
  resource_group_name                        = var.resource_group_name
  network_security_group_name                = azurerm_network_security_group.node.name
  priority                                   = 100
  direction                                  = "Inbound"
  access                                     = "Allow"
  protocol                                   = "Tcp"
  source_port_range                          = "*"
  source_address_prefixes                    = var.gpu_cidrs
  destination_port_range                     = local.s3
  destination_application_security_group_ids = [azurerm_application_security_group.node.id]
}

resource "azurerm_network_security_rule" "s3_lb" {
  name                                       = "fedgate-s3-from-lb-probe"
  resource_group_name                        = var.resource_group_name
  network_security_group_name                = azurerm_network_security_group.node.name
  priority                                   = 110
  direction                                  = "Inbound"
  access                                     = "Allow"
  protocol                                   = "Tcp"
  source_port_range                          = "*"
  source_address_prefix                      = "AzureLoadBalancer"
  destination_port_range                     = local.s3
  destination_application_security_group_ids = [azurerm_application_security_group.node.id]
}

resource "azurerm_network_security_rule" "peers" {
  name                                       = "fedgate-peers"
  resource_group_name                        = var.resource_group_name
  network_security_group_name                = azurerm_network_security_group.node.name
  priority                                   = 120
  direction                                  = "Inbound"
  access                                     = "Allow"
  protocol                                   = "Tcp"
  source_port_range                          = "*"
  source_application_security_group_ids      = [azurerm_application_security_group.node.id]
  destination_port_ranges                    = local.peers
  destination_application_security_group_ids = [azurerm_application_security_group.node.id]
}

# The default AllowVnetInBound rule would let the whole virtual network in.
resource "azurerm_network_security_rule" "deny_others" {
  name                        = "fedgate-deny-others"
  resource_group_name         = var.resource_group_name
  network_security_group_name = azurerm_network_security_group.node.name
  priority                    = 4000
  direction                   = "Inbound"
  access                      = "Deny"
  protocol                    = "*"
  source_port_range           = "*"
  source_address_prefix       = "*"
  destination_port_ranges     = local.peers
  destination_address_prefix  = "*"
}

# One NIC per node, created before the VM so that every node's address is in
# the others' user-data (--join), and kept when a VM is replaced.
resource "azurerm_network_interface" "node" {
  for_each            = local.index
  name                = "${var.name}-${each.key}"
  resource_group_name = var.resource_group_name
  location            = var.location
  tags                = local.tags

  ip_configuration {
    name                          = "primary"
    subnet_id                     = var.subnet_id
    private_ip_address_allocation = "Dynamic"
  }
}

resource "azurerm_network_interface_security_group_association" "node" {
  for_each                  = local.index
  network_interface_id      = azurerm_network_interface.node[each.key].id
  network_security_group_id = azurerm_network_security_group.node.id
}

resource "azurerm_network_interface_application_security_group_association" "node" {
  for_each                      = local.index
  network_interface_id          = azurerm_network_interface.node[each.key].id
  application_security_group_id = azurerm_application_security_group.node.id
}

# ---- storage ---------------------------------------------------------------------

# --data-dir (Raft state) on a managed disk that outlives the VM.
resource "azurerm_managed_disk" "data" {
  for_each             = local.index
  name                 = "${var.name}-${each.key}-data"
  resource_group_name  = var.resource_group_name
  location             = var.location
  zone                 = local.zone[each.key]
  storage_account_type = "Premium_LRS"
  create_option        = "Empty"
  disk_size_gb         = var.data_disk_size_gb
  tags                 = local.tags
}

# ---- nodes -----------------------------------------------------------------------

module "peer_tls" {
  source = "../peer-tls"
  count  = local.peer_tls ? 1 : 0

  name        = var.name
  nodes       = [for id in local.ids : { id = id, address = azurerm_network_interface.node[id].private_ip_address }]
  ca_cert_pem = var.peer_ca.cert_pem
  ca_key_pem  = var.peer_ca.key_pem
}

# The S3 port's certificates: the same module, the S3 CA, and the names
# clients reach the region at.
module "s3_tls" {
  source = "../peer-tls"
  count  = local.s3_tls ? 1 : 0

  name        = var.name
  nodes       = [for id in local.ids : { id = id, address = azurerm_network_interface.node[id].private_ip_address }]
  extra_names = concat([azurerm_lb.s3.frontend_ip_configuration[0].private_ip_address], var.s3_names)
  ca_cert_pem = var.s3_ca.cert_pem
  ca_key_pem  = var.s3_ca.key_pem
}

module "config" {
  source = "../node-config"

  region = var.region
  policy = var.policy
  nodes = [for id in local.ids : {
    id      = id
    address = azurerm_network_interface.node[id].private_ip_address
    # The data disk is attached at LUN 0 (azure udev rules name it).
    data_disk = "/dev/disk/azure/scsi1/lun0"
  }]
  root_credentials = var.root_credentials
  binary           = local.binary
  cache_disk_glob  = "/dev/disk/by-id/nvme-Microsoft_NVMe_Direct_Disk*"
  cache_size       = var.cache_size
  staging_size     = var.staging_size
  peer_ca_pem      = local.peer_tls ? nonsensitive(var.peer_ca.cert_pem) : null
  peer_certs       = local.peer_tls ? module.peer_tls[0].certs : {}
  s3_ca_pem        = local.s3_tls ? nonsensitive(var.s3_ca.cert_pem) : null
  s3_certs         = local.s3_tls ? module.s3_tls[0].certs : {}
  # DefaultAzureCredential picks the user-assigned identity by its client id.
  environment      = merge({ AZURE_CLIENT_ID = azurerm_user_assigned_identity.node.client_id }, var.environment)
  credential_files = var.credential_files
  extra_args       = var.extra_args
  writable_paths   = var.writable_paths
}

resource "azurerm_linux_virtual_machine" "node" {
  for_each                        = local.index
  name                            = "${var.name}-${each.key}"
  resource_group_name             = var.resource_group_name
  location                        = var.location
  zone                            = local.zone[each.key]
  size                            = var.vm_size
  admin_username                  = var.admin_username
  disable_password_authentication = true
  network_interface_ids           = [azurerm_network_interface.node[each.key].id]
  custom_data                     = base64encode(module.config.cloud_init[each.key])
  tags                            = merge(local.tags, { "fedgate-node" = each.key })

  admin_ssh_key {
    username   = var.admin_username
    public_key = var.admin_ssh_public_key
  }

  identity {
    type         = "UserAssigned"
    identity_ids = [azurerm_user_assigned_identity.node.id]
  }

  os_disk {
    caching              = "ReadWrite"
    storage_account_type = "Premium_LRS"
    disk_size_gb         = 30
  }

  source_image_reference {
    publisher = var.image.publisher
    offer     = var.image.offer
    sku       = var.image.sku
    version   = var.image.version
  }

  lifecycle {
    # Changes to custom_data, the image or the size would replace or restart
    # every VM at once (and lose every node's NVMe staging together): roll
    # them out node by node with `-replace` (docs/deploy.md).
    ignore_changes = [custom_data, source_image_reference, size]

    precondition {
      condition     = startswith(local.location, "azure:")
      error_message = "The policy file must declare region ${var.region} with an azure: location (it says \"${local.location}\")."
    }
  }
}

resource "azurerm_virtual_machine_data_disk_attachment" "data" {
  for_each           = local.index
  managed_disk_id    = azurerm_managed_disk.data[each.key].id
  virtual_machine_id = azurerm_linux_virtual_machine.node[each.key].id
  lun                = 0
  caching            = "None"
}

# ---- the region's S3 endpoint ------------------------------------------------------

resource "azurerm_lb" "s3" {
  name                = "${var.name}-s3"
  resource_group_name = var.resource_group_name
  location            = var.location
  sku                 = "Standard"
  tags                = local.tags

  frontend_ip_configuration {
    name                          = "s3"
    subnet_id                     = var.subnet_id
    private_ip_address_allocation = "Dynamic"
    zones                         = length(var.zones) == 0 ? null : var.zones
  }
}

resource "azurerm_lb_backend_address_pool" "s3" {
  name            = "fedgate-nodes"
  loadbalancer_id = azurerm_lb.s3.id
}

resource "azurerm_network_interface_backend_address_pool_association" "s3" {
  for_each                = local.index
  network_interface_id    = azurerm_network_interface.node[each.key].id
  ip_configuration_name   = "primary"
  backend_address_pool_id = azurerm_lb_backend_address_pool.s3.id
}

# A node is in service once it has joined, knows a leader and has caught up.
resource "azurerm_lb_probe" "readyz" {
  name                = "fedgate-readyz"
  loadbalancer_id     = azurerm_lb.s3.id
  protocol            = local.s3_tls ? "Https" : "Http"
  port                = module.config.s3_port
  request_path        = "/_fedgate/readyz"
  interval_in_seconds = 5
  number_of_probes    = 2
}

resource "azurerm_lb_rule" "s3" {
  name                           = "fedgate-s3"
  loadbalancer_id                = azurerm_lb.s3.id
  protocol                       = "Tcp"
  frontend_port                  = module.config.s3_port
  backend_port                   = module.config.s3_port
  frontend_ip_configuration_name = "s3"
  backend_address_pool_ids       = [azurerm_lb_backend_address_pool.s3.id]
  probe_id                       = azurerm_lb_probe.readyz.id
  idle_timeout_in_minutes        = 30
}
