"""Every package face gives what its ``__all__`` promises, whatever was imported before.

Faces load most names on first use (``nexus._lazy.lazy_attribute``), so a name that is also the
name of one of the package's submodules is a trap: once anything imports that submodule, Python
sets the package attribute to the module and the face's ``__getattr__`` is never asked again
(``from nexus.server import serve`` would hand out the module ``nexus.server.serve``). The check
imports every submodule first, then reads every name of every face. tests/test_import_rules.py
checks that other packages import only these faces.
"""

from __future__ import annotations

import importlib
import pkgutil
import types
from pathlib import Path

import nexus

ROOT = Path(nexus.__file__).parent
PACKAGES = sorted(path.name for path in ROOT.iterdir() if (path / "__init__.py").exists())

MODULE_EXPORTS = {("testing", "steps")}
"""Faces that export a submodule on purpose: ``nexus.testing.steps`` is the step constructors' namespace."""


def _import_everything() -> None:
    for package in PACKAGES:
        face = importlib.import_module(f"nexus.{package}")
        for info in pkgutil.walk_packages(face.__path__, f"nexus.{package}."):
            if not info.name.endswith("__main__"):  # ``python -m`` entry points run a command on import
                importlib.import_module(info.name)


def test_every_face_lists_its_public_names() -> None:
    assert len(PACKAGES) >= 12
    missing = [package for package in PACKAGES if not importlib.import_module(f"nexus.{package}").__all__]
    assert missing == []


def test_every_name_a_face_lists_is_the_name_not_a_module() -> None:
    _import_everything()
    wrong = []
    for package in PACKAGES:
        face = importlib.import_module(f"nexus.{package}")
        for name in face.__all__:
            value = getattr(face, name)
            if isinstance(value, types.ModuleType) and (package, name) not in MODULE_EXPORTS:
                wrong.append(f"nexus.{package}.{name} is the module {value.__name__}, not the name the face promises")
    assert wrong == []
