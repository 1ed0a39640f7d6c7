"""``python -m factforge`` runs the command line."""

from .cli import main

raise SystemExit(main())
