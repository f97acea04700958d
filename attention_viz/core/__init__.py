"""The paper (§3.1-3.2), torch only: config, attention (Eq. 1), layers, the model, its maps, importers from PyTorch."""
