"""`python -m attention_viz.train`: train one model (see trainer.py)."""

from attention_viz.train.trainer import main

main()
