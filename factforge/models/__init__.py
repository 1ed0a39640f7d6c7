"""Models: what talks to a model (the Ollama LLM client, validation of its answers, prompts/, the embedders).

May import ``factforge.rules``, the core and itself only; ``tests/test_layout.py`` checks the directions.
"""
