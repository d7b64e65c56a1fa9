# The unsafe pattern, kept only to show where Puppet puts its temp file: a file resource that
# writes straight into the kubelet's directory. validate_cmd here records the directory listing
# at the moment Puppet validates, then runs staticpodctl validate.
file { "${facts['sp_manifest_dir']}/kube-scheduler.yaml":
  ensure       => file,
  source       => $facts['sp_source'],
  mode         => '0600',
  backup       => $facts['sp_backup'],
  validate_cmd => "${facts['sp_probe']} %",
}
