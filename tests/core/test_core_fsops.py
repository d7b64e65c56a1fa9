"""fsops: the only writer inside the manifest directory (real files under tmp_path)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from staticpodd.errors import FsError, LiveFileExists
from staticpodd.layout import Layout
from staticpodd.node import fsops


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    lay = Layout.build(tmp_path)
    lay.manifest_dir.mkdir(parents=True)
    return lay


def test_a_staged_file_has_the_bytes_mode_and_owner_asked_for_under_a_dot_directory(layout: Layout) -> None:
    p = fsops.write_staged(layout, "etcd.yaml", b"hello", mode=0o640, uid=1234, gid=2345)
    assert p.parent == layout.staging_dir
    assert p.read_bytes() == b"hello"
    st = os.stat(p)
    assert stat.S_IMODE(st.st_mode) == 0o640
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (1234, 2345)
    assert all(part.startswith(".") for part in p.relative_to(layout.manifest_dir).parts[:1])
    assert stat.S_IMODE(os.stat(layout.private_dir).st_mode) == 0o700


def test_replace_swaps_the_whole_file_in_one_rename(layout: Layout) -> None:
    target = layout.manifest_dir / "etcd.yaml"
    target.write_bytes(b"old")
    staged = fsops.write_staged(layout, "etcd.yaml", b"new", mode=0o600, uid=os.getuid(), gid=os.getgid())
    fsops.replace(staged, target)
    assert target.read_bytes() == b"new"
    assert not staged.exists()
    assert os.listdir(layout.staging_dir) == []


@pytest.mark.parametrize("fallback", [False, True], ids=["renameat2", "link-unlink"])
def test_move_noreplace_never_replaces_an_existing_file(layout: Layout, monkeypatch: pytest.MonkeyPatch,
                                                       fallback: bool) -> None:
    if fallback:
        monkeypatch.setattr(fsops, "_renameat2", False)
    fsops.ensure_private_dirs(layout)
    src = layout.parked_dir / "kube-scheduler.yaml"
    dst = layout.manifest_dir / "kube-scheduler.yaml"
    src.write_bytes(b"parked")
    dst.write_bytes(b"live, written meanwhile")
    with pytest.raises(LiveFileExists):
        fsops.move_noreplace(src, dst)
    assert src.read_bytes() == b"parked"
    assert dst.read_bytes() == b"live, written meanwhile"
    dst.unlink()
    fsops.move_noreplace(src, dst)
    assert dst.read_bytes() == b"parked" and not src.exists()


def test_read_state_follows_symlinks_like_the_kubelet_and_skips_dangling_ones(layout: Layout, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.yaml"
    real.write_bytes(b"x")
    os.symlink(real, layout.manifest_dir / "link.yaml")
    os.symlink(tmp_path / "missing", layout.manifest_dir / "dangling.yaml")
    st = fsops.read_state(layout.manifest_dir / "link.yaml")
    assert st is not None and st.data == b"x" and st.is_symlink
    assert fsops.read_state(layout.manifest_dir / "dangling.yaml") is None
    assert fsops.read_state(layout.manifest_dir / "absent.yaml") is None


def test_read_state_refuses_a_directory(layout: Layout) -> None:
    (layout.manifest_dir / "apps").mkdir()
    with pytest.raises(FsError):
        fsops.read_state(layout.manifest_dir / "apps")


def test_sweep_removes_stale_staging_files_only(layout: Layout) -> None:
    a = fsops.write_staged(layout, "a.yaml", b"a", mode=0o600, uid=os.getuid(), gid=os.getgid())
    b = fsops.write_staged(layout, "b.yaml", b"b", mode=0o600, uid=os.getuid(), gid=os.getgid())
    removed = fsops.sweep_staging(layout, keep={b.name})
    assert removed == [a]
    assert not a.exists() and b.exists()


def test_a_missing_manifest_directory_is_a_clear_error(tmp_path: Path) -> None:
    lay = Layout.build(tmp_path)
    with pytest.raises(FsError) as exc:
        fsops.ensure_private_dirs(lay)
    assert exc.value.path == str(lay.manifest_dir)
    assert "staticPodPath" in (exc.value.hint or "")
