"""Server operations for the Gradio app: what the page's wiring (webui/) leaves to the server.

Static serving (static.py), the app's HTTP options (http.py), the body limit (body_limit.py), fair queueing
(admission.py), what each session keeps (sessions.py), liveness and /healthz (liveness.py), process tuning
(runtime.py), the app's Blocks: an event's values in, its answer out (answers.py). Every reach into Gradio's internals
is named in gradio_internals.py, with its check.
"""
