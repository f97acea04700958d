"""Arrays in; PNG, HTML tables and matplotlib figures out. No model, no Gradio."""
