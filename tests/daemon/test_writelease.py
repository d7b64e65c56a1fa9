"""staticpodd.node.writelease.open_for_writing: the kernel's own answer to "is this file open for
writing anywhere?", which spares the writer-hold check its /proc scan when nobody writes.

Real child processes hold the file open (as tests/daemon/test_writers_and_messages.py does for
the /proc scan); the answer must agree with what that scan finds, and never be False while a
writer holds the file.
"""

from __future__ import annotations

import os

import pytest
from daemon_harness import hold_open, release

from staticpodd.node.watch import open_writers
from staticpodd.node.writelease import open_for_writing


@pytest.mark.parametrize("mode", ["r+b", "ab", "wb"])
def test_a_child_holding_the_file_open_for_writing_is_seen_and_named_by_proc(tmp_path, mode):
    path = tmp_path / "kube-scheduler.yaml"
    path.write_bytes(b"kind: Pod\n")
    child = hold_open(path, mode)
    try:
        assert open_for_writing(path, os.stat(path)) is True
        assert [w.pid for w in open_writers(path)] == [child.pid]  # what the hold check then logs
    finally:
        release(child)
    assert open_for_writing(path) is False  # closed: nobody writes it any more


def test_readers_and_nobody_are_no_writers(tmp_path):
    path = tmp_path / "etcd.yaml"
    path.write_bytes(b"kind: Pod\n")
    assert open_for_writing(path) is False
    child = hold_open(path, "rb")
    try:
        assert open_for_writing(path) is False and open_writers(path) == []
    finally:
        release(child)


def test_our_own_write_descriptor_counts_too(tmp_path):
    """The kernel counts every writer, this process included (the /proc scan skips us): the
    daemon never holds a live file open for writing, so for it the two agree."""
    path = tmp_path / "etcd.yaml"
    path.write_bytes(b"kind: Pod\n")
    with open(path, "ab"):
        assert open_for_writing(path) is True
    assert open_for_writing(path) is False


def test_what_cannot_be_asked_is_none(tmp_path):
    path = tmp_path / "etcd.yaml"
    path.write_bytes(b"kind: Pod\n")
    assert open_for_writing(tmp_path) is None  # a directory
    assert open_for_writing(tmp_path / "gone.yaml") is None
    other = tmp_path / "other.yaml"
    other.write_bytes(b"x")
    assert open_for_writing(path, os.stat(other)) is None  # not the inode that was judged
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert open_for_writing(fifo) is None  # opened without blocking, and not a regular file
