# node-config renders what a fedgate gateway node needs, for every node of one
# region: the `fedgate server` command line, the systemd unit, the environment
# file, the policy file, the TLS and credential files, and (for cloud modules)
# the cloud-init user-data that installs the binary, prepares the disks and
# starts the unit. It creates nothing, so it needs no provider: the cloud
# modules and region-onprem call it, and internal/deploycheck evaluates it
# offline (and with OpenTofu) to check what it renders.

locals {
  policy  = yamldecode(var.policy)
  regions = [for r in try(local.policy.regions, []) : r.name]

  policy_file = "${var.paths.config_dir}/policy.yaml"
  env_file    = "${var.paths.config_dir}/fedgate.env"
  tls_dir     = "${var.paths.config_dir}/tls"
  cred_dir    = "${var.paths.config_dir}/credentials"

  # What the templates see besides the node itself. No secrets: those go only
  # to the environment, TLS and credential files.
  cfg = {
    region          = var.region
    user            = var.service_user
    paths           = var.paths
    ports           = var.ports
    binary          = var.binary
    cache_disk_glob = var.cache_disk_glob
    policy_file     = local.policy_file
    env_file        = local.env_file
    local_socket    = var.local_socket
  }

  server_config_file = "${var.paths.config_dir}/server.yaml"

  # Every node runs the same settings, in its server config file: its own id
  # and addresses, --bootstrap-expect N and --join with the other nodes.
  # Never a lone --bootstrap: a node whose disk was wiped would found a
  # second region of the same name. Keys are `fedgate server` flag names
  # (docs/server-config.md); null values are left out.
  server_settings = { for n in var.nodes : n.id => merge(
    {
      "node-id"          = n.id
      "region"           = var.region
      "listen"           = "${n.address}:${var.ports.s3}"
      "raft-addr"        = "${n.address}:${var.ports.raft}"
      "internal-addr"    = "${n.address}:${var.ports.internal}"
      "bootstrap-expect" = length(var.nodes)
      "join"             = [for o in var.nodes : "${o.address}:${var.ports.s3}" if o.id != n.id]
      "config"           = local.policy_file
      "data-dir"         = var.paths.data_dir
      "cache-dir"        = var.paths.cache_dir
      "cache-size"       = var.cache_size
      "staging-size"     = var.staging_size
    },
    var.peer_ca_pem == null ? {} : {
      "peer-cert-file" = "${local.tls_dir}/node.pem"
      "peer-key-file"  = "${local.tls_dir}/node.key"
      "peer-ca-file"   = "${local.tls_dir}/ca.pem"
    },
    # TLS on the S3 port: its own certificate and CA, not the peers'.
    var.s3_ca_pem == null ? {} : {
      "cert-file" = "${local.tls_dir}/s3.pem"
      "key-file"  = "${local.tls_dir}/s3.key"
      "ca-file"   = "${local.tls_dir}/s3-ca.pem"
    },
    # Short-circuit reads for the mounts and training processes on this host.
    var.local_socket == null ? {} : {
      "local-socket" = var.local_socket
    },
  ) }

  server_configs = { for n in var.nodes : n.id => templatefile("${path.module}/templates/server.yaml.tftpl", {
    cfg      = local.cfg
    node     = n
    settings = local.server_settings[n.id]
  }) }

  # The unit's command: the settings come from the server config file;
  # extra_args follow it on the command line (and so win over the file).
  server_args = { for n in var.nodes : n.id => concat(
    ["server", "--server-config", local.server_config_file],
    var.extra_args,
  ) }

  units = { for n in var.nodes : n.id => templatefile("${path.module}/templates/fedgate.service.tftpl", {
    cfg      = local.cfg
    node     = n
    args     = local.server_args[n.id]
    writable = concat([var.paths.data_dir, var.paths.cache_dir], var.writable_paths)
  }) }

  # `fedgate mount` units (docs/mount.md), one per mount, on every node:
  # the GPU nodes that run a gateway mount its buckets, by default through
  # its own S3 port, and through its local socket when there is one.
  mount_env_file = "${var.paths.config_dir}/mount.env"
  mount_args = { for n in var.nodes : n.id => { for m in var.mounts : m.name => concat(
    [
      "mount",
      "--endpoint", coalesce(m.endpoint, "${var.s3_ca_pem == null ? "http" : "https"}://${n.address}:${var.ports.s3}"),
      "--bucket", m.bucket,
      "--read-only=${m.read_only}",
    ],
    m.stat_ttl == null ? [] : ["--stat-ttl", m.stat_ttl],
    m.allow_other ? ["--allow-other"] : [],
    m.uid == null ? [] : ["--uid", tostring(m.uid)],
    m.gid == null ? [] : ["--gid", tostring(m.gid)],
    var.local_socket == null ? [] : ["--local-socket", var.local_socket],
    [m.mountpoint],
  ) } }
  mount_files = { for n in var.nodes : n.id => length(var.mounts) == 0 ? [] : concat(
    [for m in var.mounts : {
      path = "${var.paths.systemd_dir}/fedgate-mount-${m.name}.service"
      content = templatefile("${path.module}/templates/fedgate-mount.service.tftpl", {
        cfg = local.cfg, node = n, mount = m, args = local.mount_args[n.id][m.name], env_file = local.mount_env_file
      })
      mode  = "0644"
      owner = "root"
    }],
    [{
      path = local.mount_env_file
      content = templatefile("${path.module}/templates/mount.env.tftpl", {
        creds   = var.mount_credentials == null ? var.root_credentials : var.mount_credentials
        ca_file = var.s3_ca_pem == null ? null : "${local.tls_dir}/s3-ca.pem"
      })
      mode  = "0600"
      owner = "root"
    }],
  ) }

  env_file_content = templatefile("${path.module}/templates/fedgate.env.tftpl", {
    root        = var.root_credentials
    environment = var.environment
  })

  # The files every node needs, wherever it runs (region-onprem writes these).
  files = { for n in var.nodes : n.id => concat(
    [
      { path = "${var.paths.systemd_dir}/fedgate.service", content = local.units[n.id], mode = "0644", owner = "root" },
      { path = local.env_file, content = local.env_file_content, mode = "0600", owner = "root" },
      { path = local.policy_file, content = var.policy, mode = "0644", owner = "root" },
      { path = local.server_config_file, content = local.server_configs[n.id], mode = "0644", owner = "root" },
    ],
    var.peer_ca_pem == null ? [] : [
      { path = "${local.tls_dir}/ca.pem", content = var.peer_ca_pem, mode = "0644", owner = var.service_user },
      { path = "${local.tls_dir}/node.pem", content = var.peer_certs[n.id].cert_pem, mode = "0644", owner = var.service_user },
      { path = "${local.tls_dir}/node.key", content = var.peer_certs[n.id].key_pem, mode = "0600", owner = var.service_user },
    ],
    var.s3_ca_pem == null ? [] : [
      { path = "${local.tls_dir}/s3-ca.pem", content = var.s3_ca_pem, mode = "0644", owner = var.service_user },
      { path = "${local.tls_dir}/s3.pem", content = var.s3_certs[n.id].cert_pem, mode = "0644", owner = var.service_user },
      { path = "${local.tls_dir}/s3.key", content = var.s3_certs[n.id].key_pem, mode = "0600", owner = var.service_user },
    ],
    [for name, content in var.credential_files :
      { path = "${local.cred_dir}/${name}", content = content, mode = "0600", owner = var.service_user }
    ],
    local.mount_files[n.id],
  ) }

  # What only a cloud node needs (when var.binary is given): the installer
  # and, with local NVMe, the unit that prepares the disks at every boot.
  install_script = var.binary == null ? null : templatefile("${path.module}/templates/install-fedgate.sh.tftpl", { cfg = local.cfg })
  boot_files = var.binary == null ? {} : { for n in var.nodes : n.id => concat(
    [{ path = "${var.paths.sbin_dir}/fedgate-install", content = local.install_script, mode = "0755", owner = "root" }],
    var.cache_disk_glob == null ? [] : [
      { path = "${var.paths.sbin_dir}/fedgate-prepare-disks", content = templatefile("${path.module}/templates/prepare-disks.sh.tftpl", { cfg = local.cfg, node = n }), mode = "0755", owner = "root" },
      { path = "${var.paths.systemd_dir}/fedgate-disks.service", content = templatefile("${path.module}/templates/fedgate-disks.service.tftpl", { cfg = local.cfg }), mode = "0644", owner = "root" },
    ],
  ) }

  cloud_init = var.binary == null ? {} : { for n in var.nodes : n.id => templatefile("${path.module}/templates/cloud-init.yaml.tftpl", {
    cfg    = local.cfg
    node   = n
    files  = concat(local.files[n.id], local.boot_files[n.id])
    mounts = [for m in var.mounts : m.name]
  }) }
}
