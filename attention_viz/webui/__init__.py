"""The Gradio page: one module per tab, handlers, process tuning. The only place that imports Gradio."""
