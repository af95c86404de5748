"""CLI tests, a package so their helpers import by package (``from .cli_process import ...``).

As loose modules they were found through ``sys.path``, and ``from conftest import ...`` got
whichever directory's ``conftest`` pytest had loaded last: ``pytest tests/cli tests/engine``
failed to collect (``tests/test_collection_layout.py`` runs such subsets).
"""
