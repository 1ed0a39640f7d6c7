"""Rules: the YAML rule files and the pure stages that apply them (no database, no network).

May import the core (``factforge.errors``, ``types``, ``settings``, ``inputs``, ``jsonout``) and itself only;
``tests/test_layout.py`` checks the directions.
"""
