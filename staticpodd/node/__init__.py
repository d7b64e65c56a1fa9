"""The node's system calls: the only writer inside the manifest directory (``fsops``), the
flock (``lock``), sd_notify (``notify``), write leases (``writelease``), the systemd sandbox
(``sandbox``), whether a file may be trusted (``trust``), inotify hints (``watch``) and the
directory's fingerprint (``dirprint``). Imports nothing above the configuration layer.
"""
