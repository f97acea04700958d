"""attention_viz in the browser (and as a Hugging Face Space): `python app.py`, then http://127.0.0.1:7860.

The page lives in attention_viz.webui; host and port come from GRADIO_SERVER_NAME / GRADIO_SERVER_PORT.
"""

from attention_viz.webui.page import main

if __name__ == "__main__":
    main()
