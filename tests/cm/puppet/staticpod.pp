# Puppet: keep the desired manifest OUTSIDE the kubelet's directory (Puppet's temp file is a
# non-dot name beside the file it writes, and validate_cmd runs on it there), validated by
# staticpodctl; then let staticpodctl apply it (validate, record, atomic swap, hooks).
# The tests set $sp_root (a sandbox --root) through FACTER_sp_root; on a node leave it empty.
$root    = $facts['sp_root']
$ctl     = $root ? { undef => 'staticpodctl', '' => 'staticpodctl', default => "staticpodctl --root ${root}" }
$desired = "${root}/etc/staticpodd/desired"

file { ["${root}/etc/staticpodd", $desired]:
  ensure => directory,
  mode   => '0700',
}

file { "${desired}/kube-scheduler.yaml":
  ensure       => file,
  source       => $facts['sp_source'],
  mode         => '0600',
  backup       => false,
  validate_cmd => 'staticpodctl validate %',
}

exec { 'staticpodctl apply kube-scheduler':
  command => "${ctl} apply ${desired}/kube-scheduler.yaml --as kube-scheduler --reason puppet",
  unless  => "${ctl} apply ${desired}/kube-scheduler.yaml --as kube-scheduler --check --detailed-exitcode",
  path    => $facts['path'],
  require => File["${desired}/kube-scheduler.yaml"],
}
