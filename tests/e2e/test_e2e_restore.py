"""The real-kubelet tier (4) against a real kubelet 1.34 + containerd: with the daemon running and
``on_invalid: restore``, invalid bytes written over a running manifest are replaced by the good
ones before the kubelet's relist, and the running container is never restarted (same sandbox,
same container, same attempt count), 10 times in a row, at the kubelet's default 20 s relist
and at 5 s (the closing note's figure).

The daemon acts on the writer's close, not after its debounce: the test sets ``debounce: 1.0``
so that the old behaviour (look 1 s after the last event) shows as a failure of "restored
before the debounce ended", whatever the machine's speed.

What the product can promise, and so what is asserted: the good bytes are back within
:data:`PROMISE` of the writer's close. The bad bytes are on disk from the writer's
``open(O_TRUNC)`` until then, and a relist that reads them in that window drops the pod
(docs/kubelet-contract.md "What a broken file does to a running pod"): no daemon can act before the writer
has closed the file. That window is 10-30 ms (tests/bench/bench_e2e.py prints it and the chance
it costs a pod: about 0.3 % a write at a 5 s relist), so writes at random moments made this test
fail about 1 run in 30 at 5 s, and 2 runs in 9 when run alone: a fresh lab's relists are in
phase with the test's own schedule (write 6 came within 120 ms of a relist in every such run, and
1 ms before it in a failing one). So each bad write is placed at a chosen time *before* the
kubelet's next relist
(:data:`BEFORE_RELIST`, from :meth:`Lab.relists`: the relist schedule is exact to 2 ms), never
closer than the promise: any relist that reads the bad bytes, and any change of the pod, is then
the daemon's fault, and the writes 0.5 s and 1.0 s before a relist catch a daemon that waits for
its 1 s debounce. The failure message tells the whole story (each write against the relists, the
kubelet's and the daemon's words, the runtime's sandboxes), so that nobody needs a rerun.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from daemon_harness import journal
from e2e_lib import Node, PodState, hms, scheduler_bytes

#: The daemon's promise under test: the good bytes are back within this long after the close.
PROMISE = 0.5
#: Where each bad write goes: this many seconds before the kubelet's next relist, in turn.
BEFORE_RELIST = (3.0, 2.2, 1.6, 1.0, PROMISE)


#: B22a's fault: a tab in the indentation (the kubelet: "found a tab character").
def _broken(good: bytes) -> bytes:
    return good.replace(b"\n  name: kube-scheduler\n", b"\n\tname: kube-scheduler\n", 1)


@dataclass
class _Write:
    """One bad write and what followed, in wall-clock seconds (comparable with the kubelet's log)."""

    opened: float  # open(O_TRUNC): from here the kubelet would read bad (or no) bytes
    closed: float
    restored: float  # the good bytes' new inode seen in place
    relist: float  # the kubelet's next relist after the write
    check: PodState | None = None  # the pod, looked at after the restore
    checked: float = 0.0

    @property
    def latency(self) -> float:
        """close -> restored, seconds."""
        return self.restored - self.closed


def _relist_after(node: Node, offset: float) -> float:
    """The first relist of the kubelet that leaves ``offset`` seconds (plus a little to start
    the write) between now and itself."""
    soon = time.time()
    ticks = node.lab.relists(soon, soon + offset + 2 * node.lab.relist_seconds + 1)
    assert ticks, "cannot tell the kubelet's relist schedule (no 'Watching path' line in its log)"
    now = time.time()
    return next(t for t in ticks if t - offset > now + 0.02)


def _refused_relists(node: Node, offset: int) -> list[float]:
    """When a relist of the kubelet read bad bytes in kube-scheduler.yaml since ``offset``."""
    return [t for t, ln in node.lab.log_lines(offset) if "Could not process manifest file" in ln and "kube-scheduler" in ln]


def _story(node: Node, start: PodState, started: float, writes: list[_Write], offset: int) -> str:
    """Everything the next person needs to tell why the pod changed, without a rerun: which key
    changed and how, each write's window against the kubelet's relists, the relists that read
    bad bytes, the runtime's sandboxes and containers, the kubelet's and the daemon's words."""
    out = [f"pod captured at {hms(started)}: sandbox {start.sandbox_id[:13]}, config.hash {start.config_hash[:12]}, "
           f"containers {dict((n, (i[:13], a)) for n, (i, a) in start.containers.items())}"]
    first_bad = next((i for i, w in enumerate(writes) if w.check is None or w.check.key != start.key), None)
    if first_bad is not None:
        w = writes[first_bad]
        out.append(f"first change, at the check after write {first_bad} ({hms(w.checked)}): {start.change_to(w.check)}")
    refused = _refused_relists(node, offset)
    out.append(f"writes (open; ms from open to close and to the good bytes back in place; the kubelet's next "
               f"relist, every {node.lab.relist_seconds:g} s; the pod looked at after the restore):")
    for i, w in enumerate(writes):
        read = [t for t in refused if w.opened - 0.01 <= t <= w.relist + 0.1]
        out.append(f"  {i}: {hms(w.opened)} close +{(w.closed - w.opened) * 1000:.1f} restored "
                   f"+{(w.restored - w.opened) * 1000:.1f}; next relist {hms(w.relist)} "
                   f"(+{(w.relist - w.opened) * 1000:.0f} ms){'; that relist READ THE BAD BYTES' if read else ''}; "
                   f"check {hms(w.checked)}: {start.change_to(w.check) if w.check is None or w.check.key != start.key else 'same'}")
    ticks = node.lab.relists(writes[0].opened - 60, time.time()) if writes else []
    off = [t for t in refused if not any(abs(t - k) < 0.05 for k in ticks)]
    out.append("relists that read bad bytes ('Could not process manifest file'): "
               + (", ".join(hms(t) for t in refused) or "none")
               + (f" (not on the predicted schedule: {', '.join(hms(t) for t in off)})" if off else ""))
    out.append(f"runtime, every sandbox and container of {node.lab.pod_name('kube-scheduler')}:\n"
               + node.runtime_history("kube-scheduler"))
    out.append("kubelet log (the pod and its manifest, since it was written):\n" + node.kubelet_story(offset, "kube-scheduler"))
    try:
        entries = journal(node.root)
        out.append("staticpodd journal:\n" + "\n".join(
            f"  {hms(int(e.get('__REALTIME_TIMESTAMP', 0)) / 1e6)} {e.get('STATICPODD_EVENT', '')}: {e.get('MESSAGE', '')[:200]}"
            for e in entries[-40:]))
    except Exception as exc:  # noqa: BLE001 - a diagnostic must not hide the failure
        out.append(f"staticpodd journal: unreadable ({exc})")
    if node.daemons:
        out.append("staticpodd stderr:\n" + (node.daemons[-1].stderr.strip()[-2000:] or "  (empty)"))
    return "\n".join(out)


def _restore_ten_times(node: Node) -> list[_Write]:
    good = scheduler_bytes()
    bad = _broken(good)
    assert bad != good
    offset = node.lab.log_offset()
    live = node.write("kube-scheduler.yaml", good)
    start = node.wait_running("kube-scheduler", 60)
    started = time.time()
    node.start_daemon("on_invalid: restore\ndebounce: 1.0\n")
    writes: list[_Write] = []
    now = node.state("kube-scheduler")
    assert now is not None and now.key == start.key, (
        f"the pod changed before the first bad write (while the daemon started): {start.change_to(now)}\n"
        + _story(node, start, started, writes, offset))
    for run in range(10):
        relist = _relist_after(node, BEFORE_RELIST[run % len(BEFORE_RELIST)])
        time.sleep(max(0.0, relist - BEFORE_RELIST[run % len(BEFORE_RELIST)] - time.time()))
        ino = os.stat(live).st_ino
        opened = time.time()
        with open(live, "wb") as fh:  # in place, as `cat bad > kube-scheduler.yaml`
            fh.write(bad)
        closed = time.time()
        while os.stat(live).st_ino == ino:  # the restore renames a new inode into place
            if time.time() - closed > 5:
                raise AssertionError(f"run {run}: not restored within 5 s\n" + _story(node, start, started, writes, offset))
            time.sleep(0.0005)
        w = _Write(opened, closed, time.time(), relist)
        writes.append(w)
        assert live.read_bytes() == good, f"run {run}: restored bytes differ"
        w.check, w.checked = node.state("kube-scheduler"), time.time()
    # after the relist that followed the last write, the very same container still runs
    time.sleep(max(0.0, writes[-1].relist + 2 - time.time()))
    final = node.state("kube-scheduler")
    assert node.parse_errors(offset), "the kubelet never saw the bad bytes: the test proves nothing"
    survived = sum(w.check is not None and w.check.key == start.key for w in writes)
    if survived < 10 or final is None or final.key != start.key or _refused_relists(node, offset):
        raise AssertionError(
            f"the scheduler was restarted or a relist read the bad bytes: survived {survived}/10; at the end: "
            f"{start.change_to(final)}\n" + _story(node, start, started, writes, offset)
        )
    return writes


def _check(writes: list[_Write], relist: float) -> None:
    lat = sorted(w.latency for w in writes)
    print(f"\nrestore at {relist:g} s relists: survived 10/10, writes {', '.join(f'{b:g}' for b in BEFORE_RELIST)} s "
          f"before a relist; close->restored median {lat[len(lat) // 2] * 1000:.1f} ms, max {lat[-1] * 1000:.1f} ms")
    # acted on the close: well inside the 1 s debounce the daemon was given
    assert max(lat) < PROMISE, [round(x, 3) for x in lat]


def test_a_bad_in_place_edit_is_restored_before_the_20s_relist_and_the_container_never_restarts(node: Node) -> None:
    _check(_restore_ten_times(node), node.lab.relist_seconds)


def test_the_same_holds_at_a_5s_relist(node5: Node) -> None:
    _check(_restore_ten_times(node5), node5.lab.relist_seconds)
