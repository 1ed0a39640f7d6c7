# factforge's API server and workers (docker-compose.yml's `api` and `worker` services).
FROM python:3.12-slim
WORKDIR /app
COPY pyproject.toml README.md LICENSE alembic.ini ./
COPY factforge factforge
COPY migrations migrations
COPY patterns patterns
COPY examples examples
# Editable: the migrations and pattern files are read from /app, next to the package.
RUN pip install --no-cache-dir -e . && useradd --system factforge
USER factforge
EXPOSE 8080
CMD ["factforge", "serve", "--host", "0.0.0.0", "--port", "8080"]
