"""The app's model side, no Gradio: validated requests, cached runs, the views' data, exports."""
