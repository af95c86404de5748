"""Connecting the engine to the rest of the system: ``Runtime``/``AgentSpec``, ``EngineEnv`` and
``run_agent`` (config, ledger, model catalog), the ``spawn_agent`` tool, compaction of a stored session.

The top layer: may import ``nexus.engine.execution`` and ``nexus.engine.assembly``; neither of
them imports this package (checked by tests/engine/test_import_graph.py).
"""
