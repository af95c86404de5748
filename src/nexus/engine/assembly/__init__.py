"""Building what the model is told: system prompt, bootstrap files, history window, budget, compaction.

Everything here works on plain ``nexus.llm`` data and ``nexus.engine.types``; nothing here runs a
model loop or opens the ledger (the direction is checked by tests/test_import_rules.py).
"""
