# The unsafe pattern, kept only to show where Salt puts its temp file: file.managed straight
# into the kubelet's directory.
{{ salt['pillar.get']('sp_manifest_dir') }}/kube-scheduler.yaml:
  file.managed:
    - source: {{ salt['pillar.get']('sp_source') }}
    - mode: "0600"
