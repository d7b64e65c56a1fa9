"""Layer 5: likely mistakes -- the kubelet runs these, but not the way the author meant (warnings)."""

from __future__ import annotations

import os
import re

from staticpodd.validate.context import Context, as_dict, as_list

_SHELLS = {"sh", "bash", "ash", "dash", "zsh", "ksh", "busybox"}
_SEVERAL_FLAGS = re.compile(r"^--?[A-Za-z][\w.-]*(=\S*)?\s+--?[A-Za-z]")
_SYSTEM_PRIORITY = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def rule_priority(ctx: Context) -> None:
    """A numeric ``priority`` without ``priorityClassName`` (or not matching it).

    Code ``priority-without-class`` (warning): the pod runs, but the API server's Priority
    admission refuses the mirror pod ("the integer value of priority ... must not be provided in
    pod spec"), so the pod is invisible in kubectl. Source: docs/kubelet-contract.md "What the kubelet refuses";
    corpus case B15; plugin/pkg/admission/priority/admission.go.
    """
    spec = ctx.spec
    prio = spec.get("priority")
    cls = spec.get("priorityClassName")
    if prio is None and isinstance(cls, str) and cls:
        _class_without_priority(ctx, cls)
        return
    if not isinstance(prio, int) or isinstance(prio, bool):
        return
    if not cls:
        ctx.add(
            "priority-without-class",
            "warning",
            "spec.priority",
            f"priority {prio} without priorityClassName: the pod runs, but the API server refuses its mirror "
            'pod ("the integer value of priority must not be provided in pod spec"), so kubectl never '
            "shows it",
            "set priorityClassName (e.g. system-node-critical) and drop the number",
        )
    elif cls in _SYSTEM_PRIORITY and _SYSTEM_PRIORITY[cls] != prio:
        ctx.add(
            "priority-without-class",
            "warning",
            "spec.priority",
            f"priority {prio} does not match {cls} ({_SYSTEM_PRIORITY[cls]}): the API server refuses the mirror pod",
            f"drop priority or set it to {_SYSTEM_PRIORITY[cls]}",
        )


def _class_without_priority(ctx: Context, cls: str) -> None:
    """``priorityClassName`` without ``priority``: code ``priority-class-unresolved`` (warning).

    The kubelet never resolves a PriorityClass (only the API server's Priority admission does,
    for the mirror pod), so on the node the pod's priority is ``spec.priority`` or 0: the
    priority groups of graceful node shutdown (``shutdownGracePeriodByPodPriority``,
    pkg/kubelet/nodeshutdown/nodeshutdown_manager.go groupByPriority) and the eviction ranking
    (pkg/kubelet/eviction/helpers.go, corev1helpers.PodPriority) see 0. The pod is still
    critical because it is static (pkg/kubelet/types/pod_update.go IsCriticalPod), so it is not
    evicted and preempts at admission. A class the API server does not know refuses the mirror pod.
    kubeadm writes both (``priority: 2000001000`` with ``system-node-critical``).
    """
    value = _SYSTEM_PRIORITY.get(cls)
    if value is not None:
        message = (
            f"priorityClassName {cls} without priority: the kubelet never resolves priority classes, so on this "
            "node the pod's priority is 0 (graceful node shutdown by pod priority stops it with the lowest "
            "group); it stays critical because it is a static pod"
        )
        hint = f"add priority: {value} (kubeadm writes both)"
    else:
        message = (
            f"priorityClassName {cls!r} without priority: the kubelet never resolves priority classes, so on "
            "this node the pod's priority is 0 whatever the class says; and unless a PriorityClass of that "
            "name exists in the cluster, the API server refuses the mirror pod (invisible in kubectl)"
        )
        hint = "set priority to the class's value, or use system-node-critical with priority: 2000001000"
    ctx.add("priority-class-unresolved", "warning", "spec.priorityClassName", message, hint)


def _is_shell(argv: list) -> bool:
    head = [a for a in argv[:2] if isinstance(a, str)]
    return any(os.path.basename(a) in _SHELLS for a in head)


def rule_argv(ctx: Context) -> None:
    """argv elements that end in a shell ``\\`` or hold several flags.

    Code ``argv-shell-syntax`` (warning): ``command``/``args`` are an exec argv, not a shell line;
    a trailing backslash is passed literally and ``"--a=1 --b=2"`` is one argument, so the
    binary sees one odd flag. Shell scripts (``sh -c``) are skipped. Source: the container
    runtime's exec semantics (CRI ``Args``); a common kubeadm-manifest hand-edit mistake.
    """
    for base, c in ctx.containers():
        command = as_list(c.get("command"))
        args = as_list(c.get("args"))
        if _is_shell(command) or (not command and _is_shell(args)):
            continue
        for key, argv in (("command", command), ("args", args)):
            for i, a in enumerate(argv):
                if not isinstance(a, str):
                    continue
                fp = f"{base}.{key}[{i}]"
                if a.rstrip(" ").endswith("\\"):
                    ctx.add(
                        "argv-shell-syntax",
                        "warning",
                        fp,
                        f"argument {a!r} ends in a backslash: this is an argv list, not a shell line, so the "
                        "backslash reaches the program",
                        "remove the trailing backslash",
                    )
                elif "\n" not in a and _SEVERAL_FLAGS.match(a.strip()):
                    ctx.add(
                        "argv-shell-syntax",
                        "warning",
                        fp,
                        f"argument {a!r} holds several flags in one element: the program receives them as one argument",
                        "put each flag in its own list element",
                    )


_FILE_NAMES = re.compile(r"(^|/)[^/]+\.[A-Za-z0-9]{1,8}$|(^|/)(kubeconfig|config|token|[^/]*\.conf)$")


def _looks_like_file(path: str) -> bool:
    return not path.endswith("/") and bool(_FILE_NAMES.search(path))


def rule_host_paths(ctx: Context) -> None:
    """hostPath volumes whose path is missing on this node.

    Code ``hostpath-missing`` (warning): without ``type`` the runtime creates an empty directory
    there, so a file mount such as admin.conf silently becomes a directory (reported when the
    path looks like a file: it has an extension or is a kubeconfig); with type File,
    Directory, Socket, CharDevice or BlockDevice the pod fails to start (MountVolume.SetUp
    failed). Only checked when ``options.check_host`` is true (validating on the node itself).
    Source: pkg/volume/hostpath/host_path.go (checkType).
    """
    if not ctx.options.check_host:
        return
    for i, v in enumerate(as_list(ctx.spec.get("volumes"))):
        hp = as_dict(as_dict(v).get("hostPath"))
        path = hp.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            continue
        t = hp.get("type") or ""
        if t in ("DirectoryOrCreate", "FileOrCreate") or os.path.lexists(path):
            continue
        fp = f"spec.volumes[{i}].hostPath.path"
        if not t and not _looks_like_file(path):
            continue  # the runtime creates a missing directory, which is what a directory mount wants
        if not t:
            ctx.add(
                "hostpath-missing",
                "warning",
                fp,
                f"{path} does not exist on this node and hostPath has no type: the runtime creates an empty "
                "directory there (wrong if a file was meant)",
                "create the path first, or set type: File / Directory / DirectoryOrCreate",
            )
        else:
            ctx.add(
                "hostpath-missing",
                "warning",
                fp,
                f"{path} does not exist on this node and type is {t}: the pod will not start "
                "(MountVolume.SetUp failed: hostPath type check failed)",
                "create it, or use a *OrCreate type",
            )


def rule_images(ctx: Context) -> None:
    """Images without a tag or with ``:latest``.

    Code ``image-unpinned`` (warning): imagePullPolicy defaults to Always for ``:latest``/untagged
    images, so every restart pulls -- a control plane cannot restart while the registry is down,
    and the version can change underneath. Source: pkg/apis/core/v1/defaults.go
    SetDefaults_Container.
    """
    for base, c in ctx.containers():
        image = c.get("image")
        if not isinstance(image, str) or not image or "@" in image:
            continue
        last = image.rsplit("/", 1)[-1]
        tag = last.split(":", 1)[1] if ":" in last else None
        if tag is None or tag == "latest":
            what = "has no tag" if tag is None else "uses :latest"
            ctx.add(
                "image-unpinned",
                "warning",
                f"{base}.image",
                f"image {image!r} {what}: the kubelet pulls it again on every restart (imagePullPolicy "
                "defaults to Always), so the pod cannot restart while the registry is unreachable",
                "pin a version tag or a digest (image@sha256:...)",
            )


def rule_pinned_uid(ctx: Context) -> None:
    """A pinned ``metadata.uid``.

    Code ``pinned-uid`` (warning): the kubelet uses it instead of hashing the manifest, so spec
    changes take an in-place update path that restarts containers only on name/image change
    (inferred). Source: docs/kubelet-contract.md "Identity and restarts"; pkg/kubelet/config/common.go
    applyDefaults.
    """
    uid = as_dict(ctx.doc.get("metadata")).get("uid")
    if uid:
        ctx.add(
            "pinned-uid",
            "warning",
            "metadata.uid",
            "metadata.uid is pinned: the kubelet will not give changed manifests a new pod UID, so edits may "
            "not restart the pod",
            "remove metadata.uid and let the kubelet hash the manifest",
        )
