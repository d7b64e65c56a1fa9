#!/bin/bash
# Runs as a oneshot unit inside a booted systemd-nspawn container whose /usr is the host's (with
# the staticpodd .deb installed) -- see test_deb_package.py::test_service_runs_under_systemd.
# Results go to /e2e-out/results as name=value lines; the log to /e2e-out/log.
out=/e2e-out
exec >>"$out/log" 2>&1
set -x
r() { echo "$1=$2" >>"$out/results"; }
wait_for() { for _ in $(seq 1 150); do eval "$1" && return 0; sleep 0.1; done; return 1; }
m=/etc/kubernetes/manifests

journalctl --update-catalog
mkdir -p -m 0700 "$m"
install -m 0600 "$out/kube-scheduler.yaml" "$m/kube-scheduler.yaml"
printf 'on_invalid: restore\non_stray: quarantine\n' >/etc/staticpodd/staticpodd.yaml

systemctl restart staticpodd; r start_rc $?
r active "$(systemctl show -P ActiveState staticpodd)"
r status_text "$(systemctl show -P StatusText staticpodd)"
staticpodctl status >"$out/status.txt"; r ctl_status_rc $?
systemctl reload staticpodd; r reload_rc $?

# The daemon's own writes, inside its sandbox: quarantine a stray, restore an invalid edit.
cp -p "$m/kube-scheduler.yaml" "$m/kube-scheduler.yaml.bak"
wait_for "[ ! -e $m/kube-scheduler.yaml.bak ]"; r stray_moved_out $?
r quarantined "$(ls "$m/.staticpodd/quarantine" | tr '\n' ' ')"
good=$(sha256sum <"$m/kube-scheduler.yaml")
# A type error the kubelet refuses (it would kill the pod at its next relist), written in place.
sed 's/^  hostNetwork: true$/  hostNetwork: "true"/' "$m/kube-scheduler.yaml" >/tmp/invalid.yaml
r invalid_edit_differs "$(cmp -s /tmp/invalid.yaml "$m/kube-scheduler.yaml"; echo $?)"
cat /tmp/invalid.yaml >"$m/kube-scheduler.yaml"
wait_for '[ "$(sha256sum <$m/kube-scheduler.yaml)" = "$good" ]'; r invalid_edit_restored $?

# The CLI beside the running daemon.
staticpodctl park kube-scheduler --reason e2e; r park_rc $?
staticpodctl unpark kube-scheduler; r unpark_rc $?

# A refused reload keeps the daemon running with its old configuration.
printf 'on_stray: nonsense\n' >/etc/staticpodd/staticpodd.yaml
systemctl reload staticpodd; r bad_reload_rc $?
r active_after_bad_reload "$(systemctl show -P ActiveState staticpodd)"

# A refused configuration at start: exit 78 and no restart (RestartPreventExitStatus=78).
systemctl restart staticpodd; r bad_start_rc $?
r bad_start_state "$(systemctl show -P ActiveState staticpodd)"
r bad_start_status "$(systemctl show -P ExecMainStatus staticpodd)"
r bad_start_restarts "$(systemctl show -P NRestarts staticpodd)"

# Fixed: starts again, stops cleanly.
: >/etc/staticpodd/staticpodd.yaml
systemctl reset-failed staticpodd
systemctl start staticpodd; r fixed_start_rc $?
systemctl stop staticpodd
r stop_result "$(systemctl show -P Result staticpodd)"
r stop_status "$(systemctl show -P ExecMainStatus staticpodd)"

journalctl -x -u staticpodd --no-pager >"$out/journal-x.txt"
systemctl show staticpodd >"$out/show.txt"
r done 1
