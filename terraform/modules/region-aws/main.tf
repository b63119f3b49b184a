# region-aws: one fedgate region (3 or 5 gateway nodes) in an AWS VPC, next to
# the GPU nodes: instances with local NVMe, a persistent EBS volume each for the
# Raft state, an internal NLB as the region's S3 endpoint, security groups, and
# an IAM role with access to exactly the S3 buckets of the policy's s3 stores.
# See docs/deploy.md.

data "aws_region" "current" {}

data "aws_partition" "current" {}

data "aws_subnet" "node" {
  count = length(var.subnet_ids)
  id    = var.subnet_ids[count.index]
}

data "aws_ec2_instance_type" "node" {
  instance_type = var.instance_type
}

locals {
  # peer_ca is sensitive (its key); whether it is given is not.
  peer_tls = nonsensitive(var.peer_ca != null)
  # Likewise s3_ca: TLS on the S3 port.
  s3_tls    = nonsensitive(var.s3_ca != null)
  s3_scheme = local.s3_tls ? "https" : "http"

  ids     = [for i in range(var.node_count) : format("n%d", i + 1)]
  index   = { for i, id in local.ids : id => i }
  subnets = { for id, i in local.index : id => data.aws_subnet.node[i % length(var.subnet_ids)] }

  arch     = contains(data.aws_ec2_instance_type.node.supported_architectures, "arm64") ? "arm64" : "amd64"
  ami_id   = var.ami_id != null ? var.ami_id : data.aws_ami.ubuntu[0].id
  policy   = yamldecode(var.policy)
  location = try([for r in local.policy.regions : r.location if r.name == var.region][0], "")

  # The S3 buckets of the policy's s3 stores on AWS (not those with an
  # endpoint elsewhere, such as MinIO): the role gets exactly these.
  s3_buckets = sort(distinct([for s in try(local.policy.stores, []) : s.bucket
    if s.kind == "s3" && can(regex("^https://([a-z0-9.-]+\\.)?amazonaws\\.com(/|$)", coalesce(try(s.endpoint, null), "https://s3.amazonaws.com")))
  ]))

  # fedgate_binary.url: https://... (downloaded as is) or s3://BUCKET/KEY
  # (signed with the nodes' role, which may read exactly that object).
  binary_in_s3 = startswith(var.fedgate_binary.url, "s3://")
  binary_s3    = local.binary_in_s3 ? regex("^s3://(?P<bucket>[^/]+)/(?P<key>.+)$", var.fedgate_binary.url) : { bucket = "", key = "" }
  binary = {
    url             = local.binary_in_s3 ? "https://${local.binary_s3.bucket}.s3.${data.aws_region.current.region}.amazonaws.com/${local.binary_s3.key}" : var.fedgate_binary.url
    sha256          = var.fedgate_binary.sha256
    auth            = local.binary_in_s3 ? "aws" : "none"
    aws_region      = local.binary_in_s3 ? data.aws_region.current.region : ""
    azure_client_id = ""
  }

  tags = merge(var.tags, { "fedgate:region" = var.region })
}

data "aws_ami" "ubuntu" {
  count       = var.ami_id == null ? 1 : 0
  most_recent = true
  owners      = ["099720109477"] # Canonical

  filter {
    name   = "name"
    values = ["ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-${local.arch}-server-*"]
  }
  filter {
    name   = "virtualization-type"
    values = ["hvm"]
  }
}

# ---- network -----------------------------------------------------------------

resource "aws_security_group" "node" {
  name_prefix = "${var.name}-node-"
  description = "fedgate gateway nodes of region ${var.region}"
  vpc_id      = var.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-node" })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_security_group" "lb" {
  name_prefix = "${var.name}-lb-"
  description = "fedgate S3 endpoint (NLB) of region ${var.region}"
  vpc_id      = var.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-lb" })

  lifecycle {
    create_before_destroy = true
  }
}

# S3 port: from the GPU CIDRs (directly, and through the NLB), from the NLB
# itself (health checks), and between the nodes (--join discovery).
resource "aws_vpc_security_group_ingress_rule" "node_s3_gpu" {
  for_each          = toset(var.gpu_cidrs)
  security_group_id = aws_security_group.node.id
  description       = "S3 from GPU nodes"
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = module.config.s3_port
  to_port           = module.config.s3_port
}

resource "aws_vpc_security_group_ingress_rule" "node_s3_lb" {
  security_group_id            = aws_security_group.node.id
  description                  = "S3 and health checks from the NLB"
  referenced_security_group_id = aws_security_group.lb.id
  ip_protocol                  = "tcp"
  from_port                    = module.config.s3_port
  to_port                      = module.config.s3_port
}

# Raft, internal API and S3 (join discovery) only between gateway nodes.
resource "aws_vpc_security_group_ingress_rule" "node_peers" {
  for_each = {
    s3       = module.config.s3_port
    raft     = module.config.raft_port
    internal = module.config.internal_port
  }
  security_group_id            = aws_security_group.node.id
  description                  = "fedgate ${each.key} port between gateway nodes"
  referenced_security_group_id = aws_security_group.node.id
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
}

resource "aws_vpc_security_group_egress_rule" "node_all" {
  security_group_id = aws_security_group.node.id
  description       = "Stores in every cloud, the binary's URL, peers"
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
}

resource "aws_vpc_security_group_ingress_rule" "lb_s3_gpu" {
  for_each          = toset(var.gpu_cidrs)
  security_group_id = aws_security_group.lb.id
  description       = "S3 from GPU nodes"
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = module.config.s3_port
  to_port           = module.config.s3_port
}

resource "aws_vpc_security_group_egress_rule" "lb_nodes" {
  security_group_id            = aws_security_group.lb.id
  description                  = "To the gateway nodes' S3 port"
  referenced_security_group_id = aws_security_group.node.id
  ip_protocol                  = "tcp"
  from_port                    = module.config.s3_port
  to_port                      = module.config.s3_port
}

# One network interface per node, created before the instance so that every
# node's address is known to the others' user-data (--join), and kept when an
# instance is replaced (same --raft-addr).
resource "aws_network_interface" "node" {
  for_each        = local.index
  subnet_id       = local.subnets[each.key].id
  security_groups = [aws_security_group.node.id]
  description     = "fedgate ${var.region} ${each.key}"
  tags            = merge(local.tags, { Name = "${var.name}-${each.key}" })
}

# ---- storage -------------------------------------------------------------------

# --data-dir (Raft state) on a persistent volume that outlives the instance.
resource "aws_ebs_volume" "data" {
  for_each          = local.index
  availability_zone = local.subnets[each.key].availability_zone
  size              = var.data_volume_size_gb
  type              = "gp3"
  encrypted         = true
  tags              = merge(local.tags, { Name = "${var.name}-${each.key}-data" })
}

# ---- identity ------------------------------------------------------------------

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "node" {
  name_prefix        = "${var.name}-"
  description        = "fedgate gateway nodes of region ${var.region}"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = local.tags
}

# Least privilege: the actions docs/stores.md lists, on exactly the buckets of
# the policy's s3 stores (and reading the binary's object, when it is in S3).
data "aws_iam_policy_document" "stores" {
  count = length(local.s3_buckets) > 0 || local.binary_in_s3 ? 1 : 0

  dynamic "statement" {
    for_each = length(local.s3_buckets) > 0 ? [1] : []
    content {
      sid       = "ListStoreBuckets"
      actions   = ["s3:ListBucket", "s3:ListBucketMultipartUploads"]
      resources = [for b in local.s3_buckets : "arn:${data.aws_partition.current.partition}:s3:::${b}"]
    }
  }
  dynamic "statement" {
    for_each = length(local.s3_buckets) > 0 ? [1] : []
    content {
      sid = "ReadWriteStoreObjects"
      actions = [
        "s3:GetObject", "s3:PutObject", "s3:DeleteObject",
        "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts",
      ]
      resources = [for b in local.s3_buckets : "arn:${data.aws_partition.current.partition}:s3:::${b}/*"]
    }
  }
  dynamic "statement" {
    for_each = local.binary_in_s3 ? [1] : []
    content {
      sid       = "ReadFedgateBinary"
      actions   = ["s3:GetObject"]
      resources = ["arn:${data.aws_partition.current.partition}:s3:::${local.binary_s3.bucket}/${local.binary_s3.key}"]
    }
  }
}

resource "aws_iam_role_policy" "stores" {
  count  = length(data.aws_iam_policy_document.stores)
  name   = "fedgate-stores"
  role   = aws_iam_role.node.id
  policy = data.aws_iam_policy_document.stores[0].json
}

resource "aws_iam_role_policy_attachment" "ssm" {
  count      = var.ssm_access ? 1 : 0
  role       = aws_iam_role.node.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "node" {
  name_prefix = "${var.name}-"
  role        = aws_iam_role.node.name
  tags        = local.tags
}

# ---- nodes ---------------------------------------------------------------------

module "peer_tls" {
  source = "../peer-tls"
  count  = local.peer_tls ? 1 : 0

  name        = var.name
  nodes       = [for id in local.ids : { id = id, address = aws_network_interface.node[id].private_ip }]
  ca_cert_pem = var.peer_ca.cert_pem
  ca_key_pem  = var.peer_ca.key_pem
}

# The S3 port's certificates: the same module, the S3 CA, and the names
# clients reach the region at.
module "s3_tls" {
  source = "../peer-tls"
  count  = local.s3_tls ? 1 : 0

  name        = var.name
  nodes       = [for id in local.ids : { id = id, address = aws_network_interface.node[id].private_ip }]
  extra_names = concat([aws_lb.s3.dns_name], var.route53 == null ? [] : [var.route53.name], var.s3_names)
  ca_cert_pem = var.s3_ca.cert_pem
  ca_key_pem  = var.s3_ca.key_pem
}

module "config" {
  source = "../node-config"

  region = var.region
  policy = var.policy
  nodes = [for id in local.ids : {
    id      = id
    address = aws_network_interface.node[id].private_ip
    # Nitro instances name EBS volumes by their id (without the dash).
    data_disk = "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_${replace(aws_ebs_volume.data[id].id, "-", "")}"
  }]
  root_credentials = var.root_credentials
  binary           = local.binary
  cache_disk_glob  = "/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*"
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

resource "aws_instance" "node" {
  for_each             = local.index
  ami                  = local.ami_id
  instance_type        = var.instance_type
  iam_instance_profile = aws_iam_instance_profile.node.name
  key_name             = var.key_name
  # Gzipped: user-data is limited to 16 KiB.
  user_data_base64 = base64gzip(module.config.cloud_init[each.key])

  primary_network_interface {
    network_interface_id = aws_network_interface.node[each.key].id
  }

  root_block_device {
    volume_type = "gp3"
    volume_size = 30
    encrypted   = true
  }

  metadata_options {
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  tags = merge(local.tags, { Name = "${var.name}-${each.key}", "fedgate:node" = each.key })

  lifecycle {
    # A changed user-data, AMI or instance type must not stop/start (or
    # replace) every node at once: that would wipe every node's NVMe staging
    # together. Roll changes out node by node with `-replace`
    # (docs/deploy.md).
    ignore_changes = [user_data_base64, ami, instance_type]

    precondition {
      condition     = data.aws_ec2_instance_type.node.instance_storage_supported && data.aws_ec2_instance_type.node.total_instance_storage > 0
      error_message = "instance_type ${var.instance_type} has no local instance storage: pick one with NVMe (i4i, i7ie, im4gn, c6id, m6id, r6id, ...)."
    }
    precondition {
      condition     = startswith(local.location, "aws:")
      error_message = "The policy file must declare region ${var.region} with an aws: location (it says \"${local.location}\")."
    }
  }
}

resource "aws_volume_attachment" "data" {
  for_each    = local.index
  device_name = "/dev/sdf"
  volume_id   = aws_ebs_volume.data[each.key].id
  instance_id = aws_instance.node[each.key].id
  # Stop the instance first so the file system is unmounted cleanly.
  stop_instance_before_detaching = true
}

# ---- the region's S3 endpoint ------------------------------------------------------

resource "aws_lb" "s3" {
  name                             = "${var.name}-s3"
  internal                         = true
  load_balancer_type               = "network"
  subnets                          = var.subnet_ids
  security_groups                  = [aws_security_group.lb.id]
  enable_cross_zone_load_balancing = true
  tags                             = local.tags
}

resource "aws_lb_target_group" "s3" {
  name                 = "${var.name}-s3"
  port                 = module.config.s3_port
  protocol             = "TCP"
  vpc_id               = var.vpc_id
  target_type          = "instance"
  deregistration_delay = 60
  tags                 = local.tags

  # A node is in service once it has joined, knows a leader and has caught up.
  health_check {
    protocol            = local.s3_tls ? "HTTPS" : "HTTP"
    path                = "/_fedgate/readyz"
    port                = "traffic-port"
    matcher             = "200"
    interval            = 10
    timeout             = 5
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }
}

resource "aws_lb_target_group_attachment" "s3" {
  for_each         = local.index
  target_group_arn = aws_lb_target_group.s3.arn
  target_id        = aws_instance.node[each.key].id
  port             = module.config.s3_port
}

resource "aws_lb_listener" "s3" {
  load_balancer_arn = aws_lb.s3.arn
  port              = module.config.s3_port
  protocol          = "TCP"
  tags              = local.tags

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.s3.arn
  }
}

resource "aws_route53_record" "s3" {
  count   = var.route53 == null ? 0 : 1
  zone_id = var.route53.zone_id
  name    = var.route53.name
  type    = "A"

  alias {
    name                   = aws_lb.s3.dns_name
    zone_id                = aws_lb.s3.zone_id
    evaluate_target_health = true
  }
}
