"""``nexus models``: the model catalog as a table (or JSON)."""

from __future__ import annotations

import argparse
import json

from nexus.errors import NexusError


def models_command(args: argparse.Namespace) -> int:
    """Print the catalog (plus the local model), optionally for one provider."""
    try:
        from nexus.llm import list_models
    except ImportError as exc:
        raise NexusError(f"the model catalog is not available in this build: {exc}") from None
    from nexus.llm import local_model, model_to_dict

    models = list_models(args.provider)
    if args.provider in (None, "local") and not any(m.provider == "local" for m in models):
        models.append(local_model())
    if not models:
        return _none_listed(args)
    if args.json:
        print(json.dumps([model_to_dict(model) for model in models], indent=2))
        return 0
    rows = [("MODEL", "CONTEXT", "MAX OUT", "$IN/M", "$OUT/M", "FEATURES")]
    for m in models:
        features = ",".join(name for name, on in (("reasoning", m.reasoning), ("images", m.image_input)) if on)
        prices = (f"{m.input_price:g}", f"{m.output_price:g}")
        rows.append((m.ref, f"{m.context_window:,}", f"{m.max_tokens:,}", *prices, features or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [row[0].ljust(widths[0]), *(cell.rjust(widths[i]) for i, cell in enumerate(row[1:5], 1)), row[5]]
        print("  ".join(cells).rstrip())
    return 0


def _none_listed(args: argparse.Namespace) -> int:
    """``-p NAME`` that the catalog lists nothing for: a provider ``nexus.toml`` configures has none listed (its
    server's own ids work: exit 0, an empty list); any other name is a wrong argument (exit 2, as docs/cli.md's rule
    says: it was exit 1)."""
    import sys

    from nexus.config import load_config
    from nexus.errors import UsageError

    if args.provider in load_config(getattr(args, "config", None)).providers:
        print(
            f"nexus: the catalog lists no model of provider {args.provider!r}, which nexus.toml configures: any id "
            f"its server serves works (-m {args.provider}/MODEL_ID)",
            file=sys.stderr,
        )
        if args.json:
            print("[]")
        return 0
    raise UsageError(f"-p: no models for provider {args.provider!r} in the catalog; run `nexus models` to see all")
