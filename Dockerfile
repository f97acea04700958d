# attention_viz as a container: the app on 0.0.0.0:7860, the shipped models inside (package data), real models from
# a Hugging Face Hub cache mounted at /data/hf (offline by default). docs/deploy.md; deploy/kubernetes/ runs it.
#
#   docker build -t attention-viz .
#   docker run --rm -p 7860:7860 attention-viz
#   docker run --rm -p 7860:7860 -v ~/.cache/huggingface:/data/hf:ro \
#       -e ATTENTION_VIZ_HUB_MODELS=Helsinki-NLP/opus-mt-en-de attention-viz
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# torch first, pinned, from PyTorch's CPU index: an unpinned torch (or PyPI's) pulls the CUDA build, gigabytes more.
# requirements.txt's own torch==2.13.0 is then already met by 2.13.0+cpu and pip leaves it.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

WORKDIR /src
COPY requirements.txt ./
RUN pip install -r requirements.txt
# The package with its shipped models (package data in pyproject.toml), installed, then the sources dropped.
COPY pyproject.toml README.md ./
COPY attention_viz/ attention_viz/
RUN pip install --no-deps . && rm -rf /src

WORKDIR /app
COPY app.py ./

# A user of its own; the Hub cache is a volume, read-only in deploy/kubernetes/ (HF_HUB_OFFLINE=1: never fetched).
RUN useradd --create-home --uid 1000 --user-group app && mkdir -p /data/hf && chown app:app /data/hf
ENV HF_HOME=/data/hf \
    HF_HUB_OFFLINE=1 \
    GRADIO_SERVER_NAME=0.0.0.0 \
    GRADIO_SERVER_PORT=7860 \
    GRADIO_ANALYTICS_ENABLED=False \
    GRADIO_TEMP_DIR=/tmp/gradio \
    MPLCONFIGDIR=/tmp/matplotlib
VOLUME ["/data/hf"]
USER app
EXPOSE 7860

# The app's readiness endpoint (server/liveness.py): 200 once the server answers; no model work. The slim image has
# no curl, so Python asks.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:7860/healthz', timeout=4)"]

CMD ["python", "app.py"]
