"""Connecting the engine to the rest of the system: the ``Runtime`` and ``run_agent`` (config, ledger,
model catalog, the one way a run starts), the ``spawn_agent`` tool, compaction of a stored session.

The top layer: may import ``nexus.engine.execution`` and ``nexus.engine.assembly``; neither of
them imports this package (checked by tests/test_import_rules.py).
"""
