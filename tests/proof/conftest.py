"""Fixtures for tests/proof: see proof_fakes.py for the stand-in crictl and the probe servers."""

from __future__ import annotations

from proof_fakes import closed_port, fake_runtime, http_server, https_server, tcp_port

__all__ = ["closed_port", "fake_runtime", "http_server", "https_server", "tcp_port"]
