"""staticpodd: version, validate, atomically swap and park the kubelet's static pod manifests.

See README.md for usage and docs/kubelet-contract.md for the kubelet contract this package serves.
"""

__version__ = "0.1.0"
