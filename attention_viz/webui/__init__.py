"""The Gradio page: one module per tab, handlers, process tuning. The only place that imports Gradio."""

import os

# No telemetry: the app runs offline (Gradio otherwise calls home at launch). Set before any Gradio import.
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
