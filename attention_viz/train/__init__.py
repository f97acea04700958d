"""Training: the loop and its command line (`python -m attention_viz.train`), the d_k family."""
