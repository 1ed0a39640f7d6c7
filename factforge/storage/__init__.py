"""Storage: PostgreSQL (connections and migrations, the embedded server, the write path, search, API keys).

May import the core and itself only; ``tests/test_layout.py`` checks the directions.
"""
