"""Which heads a trained model needs (§3.2.2 taken apart): each head switched off alone, its one-pass gradient
estimate, and the prune curve.

    imp = head_importance(model, task="reverse")      # a shipped model on its task's held-out strings
    imp.drop["decoder.1.cross_attn"][2]               # exact match lost with that head alone off
    imp.can_go()                                      # heads that can go, least important first, losing <= 1 point

ours.py scores our models on their task's strings (exact match and loss); real.py scores a real model
(attention_viz.hub) by the log-probability of its own output; common.py holds what both share.
"""

from attention_viz.importance.common import ONE_POINT, spearman, variant_gates
from attention_viz.importance.ours import (HELDOUT_STRINGS, HeadImportance, batch_head_means, head_importance,
                                           head_means, michel)
from attention_viz.importance.real import RealHeadImportance, RealPartial, real_head_importance, real_head_means

__all__ = ["HELDOUT_STRINGS", "ONE_POINT", "HeadImportance", "RealHeadImportance", "RealPartial", "batch_head_means",
           "head_importance", "head_means", "michel", "real_head_importance", "real_head_means", "spearman",
           "variant_gates"]
