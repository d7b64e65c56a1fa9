"""Fixtures for tests/faults: sandbox roots, real staticpodctl processes, small tmpfs mounts.

Every fault test asserts on bytes (sha256 of every manifest and of every recorded version) and on
history, not only on exit codes: "nothing anyone wrote is lost" means every byte string anyone
put into a manifest is in some version afterwards.
"""

from __future__ import annotations


