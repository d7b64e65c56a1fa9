"""Benchmark: cost of hooks.d and of the metrics textfile, printed as times and ratios.

Run: .venv/bin/python tests/bench/bench_hooks_metrics.py   (not part of pytest; no assertions)

- run_hooks with no hook directory (the common case) vs. one stat() call;
- run_hooks with N trivial /bin/sh hooks vs. N bare subprocess.run(["/bin/true"]);
- render + write_textfile for a node with 50 components vs. a bare write+fsync+rename.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

from staticpodd.daemon.metrics import ComponentMetrics, MetricsSnapshot, render, write_textfile
from staticpodd.engine.hooks import hook_env, run_hooks
from staticpodd.layout import Layout


def best(fn, repeat: int = 7, number: int = 20) -> float:
    """Best mean seconds per call over ``repeat`` rounds of ``number`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return min(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        layout = Layout.build(root)
        layout.manifest_dir.mkdir(parents=True)
        env = hook_env(
            layout,
            component="kube-scheduler",
            file_name="kube-scheduler.yaml",
            version=3,
            digest="ab" * 32,
            actor="bench",
            reason="bench",
        )

        none = best(lambda: run_hooks(layout, "pre", "apply", env, timeout=10, journal=None), number=200)
        stat = best(lambda: os.path.isdir(layout.hooks_dir / "pre-apply.d"), number=200)
        print(f"run_hooks, no hooks dir:       {none * 1e6:8.1f} us   ({none / stat:5.1f}x one stat)")

        n = 5
        d = layout.hooks_dir / "pre-apply.d"
        d.mkdir(parents=True)
        for i in range(n):
            p = d / f"{i:02d}-noop"
            p.write_text("#!/bin/sh\nexit 0\n")
            os.chmod(p, 0o755)
        for q in (layout.config_dir, layout.hooks_dir, d):
            os.chmod(q, 0o755)
        hooks = best(lambda: run_hooks(layout, "pre", "apply", env, timeout=10, journal=None), repeat=5, number=5)
        bare = best(lambda: [subprocess.run(["/bin/true"]) for _ in range(n)], repeat=5, number=5)
        print(
            f"run_hooks, {n} trivial hooks:   {hooks * 1e3:8.2f} ms   ({hooks / n * 1e3:.2f} ms/hook; "
            f"{hooks / bare:4.2f}x {n} bare subprocess.run)"
        )

        comps = tuple(
            ComponentMetrics(
                component=f"component-{i:02d}",
                file_name=f"component-{i:02d}.yaml",
                state="parked" if i % 5 == 0 else "live",
                version=i + 1,
                digest="cd" * 32,
                parked_since=time.time() - 60 if i % 5 == 0 else None,
                parked_until=time.time() + 3600 if i % 5 == 0 else None,
            )
            for i in range(50)
        )
        snap = MetricsSnapshot(now=time.time(), started_at=time.time() - 60, components=comps, strays=1)
        out = Path(tmp) / "textfile"
        out.mkdir()
        text = render(snap)
        r = best(lambda: render(snap), number=50)
        w = best(lambda: write_textfile(out, text), number=20)

        def bare_write() -> None:
            fd, name = tempfile.mkstemp(dir=out, prefix=".bare")
            os.write(fd, text.encode())
            os.fsync(fd)
            os.close(fd)
            os.replace(name, out / "bare.prom")

        b = best(bare_write, number=20)
        print(f"render, 50 components:         {r * 1e3:8.2f} ms   ({len(text)} bytes)")
        print(f"write_textfile:                {w * 1e3:8.2f} ms   ({w / b:4.2f}x bare write+fsync+rename)")


if __name__ == "__main__":
    main()
