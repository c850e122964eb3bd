# The model server for machines with a registry: `docker build -f docker/server.Dockerfile -t streamlab/server:latest .`
# (compose.yaml builds it with `up --build`). Offline machines use `make images-offline` instead.
FROM python:3.11-slim-bookworm

ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1 PIP_NO_CACHE_DIR=1
WORKDIR /app

# The CPU build of torch first, from PyTorch's own index: plain `torch` from PyPI pulls a
# multi-GB CUDA build.
RUN pip install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu

COPY pyproject.toml README.md ./
COPY server server
COPY proxies proxies
COPY labs labs
# Editable, so the package's root is /app and the model lands where the server looks by default.
RUN pip install -e . && python -m server.tools.model_builder --out /app/.models/tiny

# Not root: the server needs no privilege (host networking, a port above 1024).
RUN useradd --system --uid 10001 streamlab
USER streamlab
EXPOSE 8000
STOPSIGNAL SIGTERM
ENTRYPOINT ["python", "-m", "server"]
CMD ["--host", "127.0.0.1", "--port", "8000"]
