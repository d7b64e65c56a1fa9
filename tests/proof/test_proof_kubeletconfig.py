"""The kubelet's relist period, read from its KubeletConfiguration (the prover waits one relist
before it believes a pod that never stopped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from staticpodd.proof.kubeletconfig import DEFAULT_FILE_CHECK_FREQUENCY, file_check_frequency, go_duration


@pytest.mark.parametrize("text,seconds", [("20s", 20.0), ("1m0s", 60.0), ("500ms", 0.5), ("1.5s", 1.5), ("1h", 3600.0)])
def test_go_durations_are_read_as_seconds(text: str, seconds: float) -> None:
    assert go_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "20", "s", "20x", "-5s", "5s junk"])
def test_what_is_not_a_go_duration_is_none(text: str) -> None:
    assert go_duration(text) is None


def test_file_check_frequency_comes_from_the_kubelet_config(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfileCheckFrequency: 5s\n")
    assert file_check_frequency(cfg) == 5.0


@pytest.mark.parametrize("body", [None, "kind: KubeletConfiguration\n", "fileCheckFrequency: 0s\n", "fileCheckFrequency: soon\n"])
def test_a_missing_zero_or_odd_value_is_the_kubelets_default_never_shorter(tmp_path: Path, body: str | None) -> None:
    cfg = tmp_path / "config.yaml"
    if body is not None:
        cfg.write_text(body)
    assert file_check_frequency(cfg) == DEFAULT_FILE_CHECK_FREQUENCY == 20.0
