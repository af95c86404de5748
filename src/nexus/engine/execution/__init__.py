"""Running what assembly built: the run loop, failover, events and callbacks, the turn journal.

Imports ``nexus.engine.assembly`` and ``nexus.engine.types``, never ``nexus.engine.wiring``
(checked by tests/engine/test_import_graph.py).
"""
