"""Research on a model's maps that needs the model to run: its maps of a text with their tokens, pattern scores on
a repeated random sequence, two texts or two models compared. The math on the maps is core's (rollout, flow,
patterns, alignment)."""
