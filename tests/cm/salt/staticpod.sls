# Salt: the desired manifest lives OUTSIDE the kubelet's directory (file.managed writes a
# non-dot temp file beside its target), checked by staticpodctl validate; staticpodctl apply
# then reports through cmd.run's stateful protocol (--json prints {"changed", "comment", ...}).
# The tests pass pillar sp_root (a sandbox --root); on a node leave it unset.
{% set root = salt['pillar.get']('sp_root', '') %}
{% set ctl = 'staticpodctl' ~ (' --root ' ~ root if root else '') %}
{% set desired = root ~ '/etc/staticpodd/desired/kube-scheduler.yaml' %}

kube-scheduler-desired:
  file.managed:
    - name: {{ desired }}
    - source: {{ salt['pillar.get']('sp_source', 'salt://kube-scheduler.yaml') }}
    - mode: "0600"
    - makedirs: True
    - check_cmd: staticpodctl validate

kube-scheduler-apply:
  cmd.run:
    - name: {{ ctl }} apply {{ desired }} --as kube-scheduler --json --reason salt
    - stateful:
      - test_name: {{ ctl }} apply {{ desired }} --as kube-scheduler --json --check
    - require:
      - file: kube-scheduler-desired
