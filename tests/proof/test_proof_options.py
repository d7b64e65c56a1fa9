"""--wait options, duration parsing, the critical-component rule over the real corpus, parsing of
crictl's JSON shapes, and the terminal progress renderer. Pure; no runtime, no network."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
import yaml
from proof_fakes import CORPUS

from staticpodd.proof import (
    WAIT_DEFAULT,
    Progress,
    Sandbox,
    TerminalProgress,
    WaitOptions,
    add_wait_arguments,
    critical_component_reason,
    parse_duration,
    probe_specs,
)
from staticpodd.proof.runtime import Container


def parser(verb: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="staticpodctl " + verb, exit_on_error=False)
    p.add_argument("component")
    add_wait_arguments(p, verb=verb)
    return p


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("5m", 300), ("1h30m", 5400), ("1.5m", 90), ("500ms", 0.5), ("300", 300), (" 2M ", 120)],
)
def test_durations_read_like_kubeadm_and_go(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5x", "m5", "kube-scheduler", "0s", "5m junk", "\u0661\u0660m", "\u0661\u0660"])
def test_bad_durations_are_usage_errors(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(text)


def test_bare_wait_uses_the_configured_timeout_else_five_minutes() -> None:
    args = parser("park").parse_args(["kube-scheduler", "--wait"])
    assert args.wait == WAIT_DEFAULT
    assert WaitOptions.from_args(args).timeout == 300
    assert WaitOptions.from_args(args, {"wait_timeout": 120}).timeout == 120
    assert WaitOptions.from_args(parser("park").parse_args(["x", "--wait=90s"])).timeout == 90
    assert WaitOptions.from_args(parser("park").parse_args(["x"])).timeout is None


def test_a_component_after_a_bare_wait_gets_a_clear_message() -> None:
    with pytest.raises(argparse.ArgumentError, match="--wait=5m or put --wait after the component"):
        parser("park").parse_args(["--wait", "kube-scheduler"])


def test_rollback_on_failure_implies_wait_and_exists_only_where_it_means_something() -> None:
    args = parser("apply").parse_args(["f.yaml", "--rollback-on-failure"])
    opts = WaitOptions.from_args(args)
    assert opts.rollback_on_failure and opts.timeout == 300
    args = parser("apply").parse_args(["f.yaml", "--rollback-on-failure", "--wait=1m"])
    assert WaitOptions.from_args(args).timeout == 60
    args = parser("edit").parse_args(["x", "--wait"])
    assert WaitOptions.from_args(args, {"rollback_on_failure": True}).rollback_on_failure
    args = parser("edit").parse_args(["x", "--wait", "--no-rollback-on-failure"])
    assert not WaitOptions.from_args(args, {"rollback_on_failure": True}).rollback_on_failure
    park = parser("park").parse_args(["x", "--force", "--wait"])
    assert park.force and not WaitOptions.from_args(park, {"rollback_on_failure": True}).rollback_on_failure
    with pytest.raises(SystemExit):  # unrecognized arguments: a usage error (exit 2)
        parser("park").parse_args(["x", "--rollback-on-failure"])
    with pytest.raises(SystemExit):
        parser("apply").parse_args(["x", "--force"])


def test_runtime_options_and_an_existing_node_name_option() -> None:
    args = parser("unpark").parse_args(
        [
            "x",
            "--crictl",
            "/usr/local/bin/crictl",
            "--runtime-endpoint",
            "unix:///run/crio/crio.sock",
            "--node-name",
            "n1",
        ]
    )
    assert (args.crictl, args.runtime_endpoint, args.node_name) == (
        "/usr/local/bin/crictl",
        "unix:///run/crio/crio.sock",
        "n1",
    )
    p = argparse.ArgumentParser()
    p.add_argument("--node-name", dest="node_name")
    add_wait_arguments(p, verb="unpark")  # no conflict with a global --node-name
    assert p.parse_args(["--node-name", "n2"]).node_name == "n2"


CRITICAL = {
    "01-zetaoss-kubeadm-kube-apiserver.yaml": "kube-apiserver",
    "04-zetaoss-kubeadm-etcd.yaml": "etcd",
    "05-cmeza99-kubeadm-v1.8-kube-apiserver.yaml": "kube-apiserver",
    "06-kubeadm-docs-keepalived.yaml": "keepalived",
    "07-kubeadm-docs-haproxy.yaml": "haproxy",
    "08-kube-vip-docs-arp.yaml": "kube-vip",
    "09-kubeadm-docs-kube-vip-bgp.yaml": "kube-vip",
    "10-kubespray-nginx-proxy.yaml": "nginx-proxy",
    "11-kubespray-haproxy.yaml": "haproxy",
    "12-kubespray-kube-vip.yaml": "kube-vip",
    "13-rke2-etcd.yaml": "etcd",
    "14-k8s-gce-etcd.json": "etcd",
    "19-openshift-etcd.yaml": "etcd",
    "21-openshift-mco-keepalived.yaml": "keepalived",
    "22-typhoon-kube-apiserver.yaml": "kube-apiserver",
}


def corpus_docs() -> list[tuple[str, dict]]:
    mdir = CORPUS / "manifests"
    if not mdir.is_dir():
        pytest.skip(f"corpus not found at {CORPUS} (set STATICPODD_CORPUS)")
    return [(p.name, yaml.safe_load(p.read_text())) for p in sorted(mdir.iterdir())]


def test_components_the_kubelets_api_connection_depends_on_are_recognised_in_the_corpus() -> None:
    docs = corpus_docs()
    assert len(docs) == 24
    for name, doc in docs:
        reason = critical_component_reason(doc)
        if name in CRITICAL:
            assert reason and CRITICAL[name] in reason, name
        else:
            assert reason is None, (name, reason)


def test_a_local_apiserver_is_not_critical_when_the_kubelet_reaches_another_one() -> None:
    docs = dict(corpus_docs())
    api = docs["01-zetaoss-kubeadm-kube-apiserver.yaml"]
    assert "not known here" in (critical_component_reason(api) or "")
    assert "no other apiserver" in (critical_component_reason(api, node_has_other_apiservers=False) or "")
    assert critical_component_reason(api, node_has_other_apiservers=True) is None
    # a load balancer stays critical whatever the apiservers are
    assert critical_component_reason(docs["07-kubeadm-docs-haproxy.yaml"], node_has_other_apiservers=True)


def test_probe_specs_of_real_manifests() -> None:
    docs = dict(corpus_docs())
    specs = probe_specs(docs["01-zetaoss-kubeadm-kube-apiserver.yaml"])
    assert [(s.kind, s.scheme, s.host, s.port, s.path) for s in specs] == [
        ("startupProbe", "HTTPS", "10.20.0.11", 6443, "/livez"),
        ("readinessProbe", "HTTPS", "10.20.0.11", 6443, "/readyz"),
        ("livenessProbe", "HTTPS", "10.20.0.11", 6443, "/livez"),
    ]
    start = specs[0]
    assert (start.period, start.failure_threshold, start.initial_delay, start.timeout) == (10, 24, 10, 15)
    etcd = probe_specs(docs["04-zetaoss-kubeadm-etcd.yaml"])
    assert etcd[0].path == "/health?serializable=false"
    oc = probe_specs(docs["18-openshift-kube-scheduler.yaml"])
    assert oc[0].path == "/healthz" and oc[0].host is None  # "healthz" without a slash, as OpenShift ships it
    gce = probe_specs(docs["14-k8s-gce-etcd.json"])
    assert gce[0].handler == "exec" and gce[0].command[0] == "/bin/sh"
    ks = probe_specs(docs["10-kubespray-nginx-proxy.yaml"])
    assert (ks[0].scheme, ks[0].port, ks[0].failure_threshold, ks[0].period) == ("HTTP", 8081, 3, 10)


def test_a_named_port_that_does_not_exist_is_an_unusable_probe() -> None:
    doc = {"spec": {"containers": [{"name": "c", "livenessProbe": {"tcpSocket": {"port": "metrics"}}}]}}
    (spec,) = probe_specs(doc)
    assert spec.error and "metrics" in spec.error


def test_crictl_json_from_old_and_new_releases_parses_alike() -> None:
    new = {
        "id": "abc",
        "metadata": {"name": "etcd-cp-1", "uid": "h1", "namespace": "kube-system", "attempt": 0},
        "state": "SANDBOX_READY",
        "createdAt": "1764441600000000000",
        "annotations": {"kubernetes.io/config.hash": "h1"},
    }
    old = dict(new, createdAt=1764441600000000000)
    assert Sandbox.from_json(new) == Sandbox.from_json(old)
    assert Sandbox.from_json(new).config_hash == "h1" and Sandbox.from_json(new).ready
    no_annotations = dict(new, annotations=None)
    assert Sandbox.from_json(no_annotations).config_hash == "h1"  # the UID is the same value
    inspected = dict(new, createdAt="2025-11-29T18:40:00.123Z", network={"ip": "10.85.0.7"})
    assert Sandbox.from_json(inspected).ip == "10.85.0.7"
    c = Container.from_json(
        {
            "id": "c1",
            "podSandboxId": "abc",
            "metadata": {"name": "etcd", "attempt": 2},
            "image": {"image": "registry.k8s.io/etcd:3.5.10-0"},
            "state": "CONTAINER_RUNNING",
            "createdAt": "1764441601000000000",
        }
    )
    assert c.running and c.attempt == 2 and c.created_ns == 1764441601000000000


def test_terminal_progress_prints_a_line_per_change_when_not_a_tty() -> None:
    buf = io.StringIO()
    tp = TerminalProgress(buf)
    tp(Progress("stopping", "waiting for the kubelet to stop x", 0.1, 5))
    tp(Progress("stopping", "waiting for the kubelet to stop x", 0.6, 5))
    tp(Progress("done", "stopped", 1.0, 5, done=True))
    assert buf.getvalue().count("waiting for the kubelet to stop x") == 1


def test_terminal_progress_rewrites_one_line_on_a_tty() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    buf = Tty()
    tp = TerminalProgress(buf)
    tp(Progress("sandbox", "waiting for a new sandbox of kube-system/x", 2.0, 300))
    tp(Progress("done", "ok", 3.0, 300, done=True))
    out = buf.getvalue()
    assert "\r\x1b[2K" in out and "(2s/300s)" in out and out.endswith("\r\x1b[2K")


def test_the_package_needs_no_kubernetes_client(tmp_path: Path) -> None:
    # in a fresh interpreter: another test of the session (pin's) may have imported the client
    import subprocess
    import sys

    code = ("import sys, staticpodd.proof as proof; assert proof.__all__; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'kubernetes'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
