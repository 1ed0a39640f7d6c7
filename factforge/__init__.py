"""factforge: rules-first fact-extraction memory for AI agents, stored in PostgreSQL + pgvector."""

from __future__ import annotations

import logging

logging.getLogger("factforge").addHandler(logging.NullHandler())

__version__ = "0.1.0"
__all__ = ["__version__"]
