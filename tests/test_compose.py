"""docker-compose.yml, described as production-like: pinned images, nothing published beyond this host, no
password in the file, and the README says how to wait for the model pull and point the host CLI at it."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SERVICES = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def test_every_image_is_pinned() -> None:
    for name, service in SERVICES.items():
        image = service.get("image", "")
        tag = image.rpartition(":")[2] if ":" in image else ""
        assert tag and tag != "latest" and any(c.isdigit() for c in tag), f"{name}: {image!r} is not pinned"


def test_ports_are_published_on_this_host_only() -> None:
    for name, service in SERVICES.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name}: {port} is published on every interface"


def test_the_database_password_comes_from_the_environment() -> None:
    password = SERVICES["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert password.startswith("${") and ":?" in password  # required, no default in the file


def test_readme_says_how_to_wait_and_connect() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "docker compose wait ollama-pull" in readme
    assert "export FACTFORGE_DATABASE_URL=postgresql://factforge:$FACTFORGE_DB_PASSWORD@127.0.0.1:5432/factforge" \
        in readme
