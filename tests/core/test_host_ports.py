"""apply, edit, rollback and unpark refuse bytes whose host port another live pod already claims:
the kubelet would reject one of the two pods at admission (docs/kubelet-contract.md "What the kubelet refuses":
"Host ports already taken fail admission too"), and ``validate DIR`` would flag the directory as
``host-port-conflict``. Same rule as ``validate DIR`` (hostNetwork claims every containerPort and
the control-plane binaries' flags; hostIPs overlap when equal or one is 0.0.0.0; one pod in two
files never conflicts with itself; the component's own live file is what the bytes replace)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from staticpodd.validate import validate_directory

SCHED = "kube-scheduler.yaml"


def port_pod(name: str, port: int, *, host_ip: str | None = None, protocol: str | None = None,
             host_network: bool = False) -> str:
    """A valid static pod whose one container claims host port ``port``."""
    ip = f"      hostIP: {host_ip}\n" if host_ip else ""
    proto = f"      protocol: {protocol}\n" if protocol else ""
    if host_network:
        return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  hostNetwork: true\n"
                f"  containers:\n  - name: {name}\n    image: nginx:1.27\n    ports:\n"
                f"    - containerPort: {port}\n{ip}{proto}")
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: {name}\n"
            f"    image: nginx:1.27\n    ports:\n    - containerPort: 80\n      hostPort: {port}\n{ip}{proto}")


def _refused(r, port: str, other: str) -> dict:
    assert r.rc == 4, (r.out, r.err)
    err = r.json()["error"]
    assert err["code"] == "conflict", err
    assert port in err["message"] and other in err["message"], err["message"]
    return err


def test_apply_refuses_a_new_file_whose_host_port_the_scheduler_claims(kubeadm, ctl, tmp_path) -> None:
    """kube-scheduler (hostNetwork) listens on 10259 (its --secure-port default): a new pod
    claiming 10259/TCP is refused before anything changes, also by --check, and the error says
    which file, port, field and line, and which file and pod hold it."""
    src = tmp_path / "web.yaml"
    src.write_text(port_pod("web", 10259))
    before = kubeadm.snapshot()
    r = ctl("apply", str(src), "--json")
    err = _refused(r, "10259/TCP", SCHED)
    assert "kube-system/kube-scheduler" in err["message"] and "web.yaml" in err["message"]
    assert err["field"] == "spec.containers[0].ports[0]" and err["field"] in err["message"]
    assert err["path"] == str(src) and err["line"] == 10
    assert err["details"]["other_file"] == SCHED and err["details"]["port"] == 10259
    assert "staticpodctl park kube-scheduler" in err["hint"]
    assert kubeadm.snapshot() == before
    assert ctl("history", "web", "--json").rc != 0  # nothing recorded
    assert ctl("apply", str(src), "--check", "--json").rc == 4
    r = ctl("apply", str(src))
    assert r.rc == 4 and "host port 10259/TCP" in r.err and f"{src}:10" in r.err, r.err
    # 10259 is a port the scheduler's flag names, not one it declares: admission does not see it,
    # the kubelet admits both pods and the second to start fails to bind
    assert err["details"]["code"] == "host-port-bind-conflict"
    assert "admit both pods" in err["message"] and "fail to bind" in err["message"]
    assert "rejected at admission" not in err["message"]


CASES = [
    ({"port": 8080}, {"port": 8080}, True),
    ({"port": 8080}, {"port": 8081}, False),
    ({"port": 8080, "protocol": "UDP"}, {"port": 8080}, False),
    ({"port": 8080, "host_ip": "127.0.0.1"}, {"port": 8080, "host_ip": "10.0.0.1"}, False),
    ({"port": 8080, "host_ip": "127.0.0.1"}, {"port": 8080, "host_ip": "127.0.0.1"}, True),
    ({"port": 8080, "host_ip": "127.0.0.1"}, {"port": 8080}, True),  # theirs is 0.0.0.0: every address
    ({"port": 8080, "host_network": True}, {"port": 8080}, True),  # hostNetwork: hostPort = containerPort
]


def test_apply_refuses_exactly_what_validate_dir_flags(ctl, tmp_path) -> None:
    """The refusal follows ``validate DIR``'s host-port-conflict: for each case (a node of its
    own), apply refuses exactly when the directory with the new file in it would be flagged."""
    for i, (mine, theirs, refused) in enumerate(CASES):
        root = tmp_path / f"node{i}"
        mdir = root / "etc/kubernetes/manifests"
        mdir.mkdir(parents=True)
        (mdir / "api.yaml").write_text(port_pod("api", **theirs))
        assert ctl("status", root=root).rc == 0
        src = tmp_path / f"new{i}" / "web.yaml"
        src.parent.mkdir()
        src.write_text(port_pod("web", **mine))
        flagged = tmp_path / f"flagged{i}"
        flagged.mkdir()
        (flagged / "api.yaml").write_text(port_pod("api", **theirs))
        (flagged / "web.yaml").write_text(port_pod("web", **mine))
        by_validate = any(f.code == "host-port-conflict" for f in validate_directory(flagged))
        assert by_validate == refused, (mine, theirs)
        r = ctl("apply", str(src), "--json", root=root)
        assert (r.rc == 4) == refused, (mine, theirs, r.out, r.err)
        assert (mdir / "web.yaml").exists() == (not refused)


def test_a_components_own_live_file_never_conflicts_with_its_new_bytes(sandbox, ctl, tmp_path) -> None:
    sandbox.write("web.yaml", port_pod("web", 8080))
    sandbox.write("api.yaml", port_pod("api", 9090))
    src = tmp_path / "web.yaml"
    src.write_text(port_pod("web", 8080, host_ip="0.0.0.0"))
    assert ctl("apply", str(src)).rc == 0  # web's port, held by web.yaml itself
    src.write_text(port_pod("web", 9090))
    _refused(ctl("apply", str(src), "--json"), "9090/TCP", "api.yaml")


def test_edit_refuses_a_host_port_another_pod_claims(sandbox, ctl, tmp_path, monkeypatch) -> None:
    sandbox.write("web.yaml", port_pod("web", 8080))
    sandbox.write("api.yaml", port_pod("api", 9090))
    script = tmp_path / "editor.py"
    script.write_text("import sys\np = sys.argv[1]\ns = open(p).read().replace('8080', '9090')\nopen(p, 'w').write(s)\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    monkeypatch.delenv("VISUAL", raising=False)
    before = sandbox.snapshot()
    _refused(ctl("edit", "web", "--json"), "9090/TCP", "api.yaml")
    assert sandbox.snapshot() == before


def test_rollback_refuses_a_version_whose_port_another_pod_took_meanwhile(sandbox, ctl, tmp_path) -> None:
    sandbox.write("web.yaml", port_pod("web", 8080))
    src = tmp_path / "web.yaml"
    src.write_text(port_pod("web", 8081))
    assert ctl("apply", str(src)).rc == 0  # web moves to 8081
    other = tmp_path / "api.yaml"
    other.write_text(port_pod("api", 8080))
    assert ctl("apply", str(other)).rc == 0  # api takes the port web left
    err = _refused(ctl("rollback", "web", "--json"), "8080/TCP", "api.yaml")
    assert "default/api" in err["message"]
    assert b"8081" in (sandbox.manifests / "web.yaml").read_bytes()


def test_unpark_refuses_a_pod_whose_port_another_pod_took_while_it_was_parked(sandbox, ctl, tmp_path) -> None:
    sandbox.write("web.yaml", port_pod("web", 8080))
    assert ctl("park", "web").rc == 0
    other = tmp_path / "api.yaml"
    other.write_text(port_pod("api", 8080))
    assert ctl("apply", str(other)).rc == 0  # nothing live holds 8080 while web is parked
    err = _refused(ctl("unpark", "web", "--json"), "8080/TCP", "api.yaml")
    assert "unparking" in err["message"]
    assert not (sandbox.manifests / "web.yaml").exists() and (sandbox.parked / "web.yaml").exists()
    # apply --unpark of the parked component: refused too, the parked copy unchanged
    src = tmp_path / "web.yaml"
    src.write_text(port_pod("web", 8080) + "# changed\n")
    assert ctl("apply", str(src), "--unpark").rc == 4
    assert not (sandbox.manifests / "web.yaml").exists()
    assert ctl("park", "api").rc == 0
    assert ctl("unpark", "web").rc == 0  # the port is free again


def test_a_non_utf8_named_file_and_a_link_claim_their_ports_too(sandbox, ctl, tmp_path) -> None:
    """The kubelet reads both (docs/kubelet-contract.md "Which files are pods"): staticpodd tracks neither as a
    component, but their host ports are taken all the same."""
    odd = os.fsencode(str(sandbox.manifests)) + b"/caf\xe9.yaml"
    with open(odd, "wb") as fh:
        fh.write(port_pod("cafe", 8080).encode())
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text(port_pod("linked", 9090))
    os.symlink(outside, sandbox.manifests / "linked.yaml")
    src = tmp_path / "web.yaml"
    src.write_text(port_pod("web", 8080))
    err = _refused(ctl("apply", str(src), "--json"), "8080/TCP", "caf\\xe9.yaml")
    assert "not UTF-8" in err["hint"]
    src.write_text(port_pod("web", 9090))
    _refused(ctl("apply", str(src), "--json"), "9090/TCP", "linked.yaml")
    src.write_text(port_pod("web", 7070))
    assert ctl("apply", str(src)).rc == 0


def test_a_file_edited_by_hand_to_take_the_port_is_seen(sandbox, ctl, tmp_path) -> None:
    """Claims are cached by the stat signature the bytes were read with: a hand edit changes
    the stat, so the new claim counts."""
    sandbox.write("api.yaml", port_pod("api", 9090))
    src = tmp_path / "web.yaml"
    src.write_text(port_pod("web", 8080))
    assert ctl("apply", str(src)).rc == 0
    assert ctl("park", "web").rc == 0 and ctl("unpark", "web").rc == 0  # every claim cached
    Path(sandbox.manifests / "api.yaml").write_text(port_pod("api", 8080))
    src.write_text(port_pod("web", 8080) + "# new\n")
    _refused(ctl("apply", str(src), "--json"), "8080/TCP", "api.yaml")


def test_only_pods_the_kubelet_runs_hold_ports(sandbox, ctl, tmp_path) -> None:
    """A newcomer's two wrong refusals: of two files defining one pod the kubelet runs the
    lexically last and ignores the other (docs/kubelet-contract.md "Duplicate names across files"), and it
    never runs a file it refuses; neither holds a host port, for apply as for validate DIR. The
    file the kubelet does run still does."""
    sandbox.write("a.yaml", port_pod("a", 9090))  # ignored: a.yaml.bak defines pod a too and sorts last
    sandbox.write("a.yaml.bak", port_pod("a", 8080))
    sandbox.write("holder.yaml", port_pod("holder", 7070).replace("spec:\n", "spec:\n  restartPolicy: Bogus\n"))
    judged = tmp_path / "judged"  # the directory as it would be with b and c in it
    judged.mkdir()
    for f in sandbox.manifests.iterdir():
        (judged / f.name).write_bytes(f.read_bytes())
    (judged / "b.yaml").write_text(port_pod("b", 9090))
    (judged / "c.yaml").write_text(port_pod("c", 7070))
    assert [f.path for f in validate_directory(judged) if f.code == "host-port-conflict"] == []
    for name, port in (("b", 9090), ("c", 7070)):
        src = tmp_path / f"{name}.yaml"
        src.write_text(port_pod(name, port))
        r = ctl("apply", str(src), "--json")
        assert r.rc == 0, (name, r.out, r.err)
    src = tmp_path / "d.yaml"
    src.write_text(port_pod("d", 8080))
    _refused(ctl("apply", str(src), "--json"), "8080/TCP", "a.yaml.bak")
    (sandbox.manifests / "d.yaml").write_text(port_pod("d", 8080))
    flagged = [f for f in validate_directory(sandbox.manifests) if f.code == "host-port-conflict"]
    assert [os.path.basename(f.path) for f in flagged] == ["d.yaml"]
