"""Running what assembly built: the run loop, failover, events and callbacks, the turn journal.

Imports ``nexus.engine.assembly`` and ``nexus.engine.types``, never ``nexus.engine.wiring``
(checked by tests/test_import_rules.py).
"""
