"""The version store: ``versions`` (:class:`~staticpodd.store.versions.VersionStore` over
SQLite), its rows (``rows``), compressed blobs (``blobcodec``), schema upgrades
(``migrations``), pruning (``retention``) and the alert counters read from its rows
(``tallies``).
"""
