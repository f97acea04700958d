"""TransformerConfig: the hyper-parameters of the encoder-decoder Transformer (§3, Table 3)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

COMPATIBILITIES = ("dot_product", "additive")  # the two compatibility functions §3.2.1 compares
INITS = ("xavier", "unit_qk")  # how W_Q and W_K start (every other matrix is Xavier-uniform either way)


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes of the model; the defaults are the paper's base model (Table 3)."""

    vocab_size: int = 37000      # shared source/target vocabulary (§5.1: byte-pair encoding, ~37k tokens)
    n_encoder_layers: int = 6    # N
    n_decoder_layers: int = 6    # N
    d_model: int = 512           # width of every sub-layer output and of the embeddings
    n_heads: int = 8             # h
    d_k: int = 64                # query/key width per head (free: need not be d_model / h)
    d_v: int = 64                # value width per head
    d_ff: int = 2048             # inner width of the position-wise feed-forward network
    dropout: float = 0.1         # P_drop, on sub-layer outputs, embeddings and attention weights
    pad_id: int = 0              # token id the padding mask hides
    bos_id: int = 1              # the decoder's first input token: greedy decoding starts from it
    eos_id: int = 2              # the token that ends a greedy decode
    share_embeddings: bool = True  # §3.4: one matrix for both embeddings and the pre-softmax projection
    final_norm: bool = False     # an extra LayerNorm after each stack (nn.Transformer has it; the paper does not)
    layer_norm_eps: float = 1e-5
    # Per-stack overrides of final_norm (None: as final_norm), for imported models whose stacks differ.
    encoder_final_norm: bool | None = None
    decoder_final_norm: bool | None = None
    compatibility: str = "dot_product"  # §3.2.1: "dot_product" (Eq. 1; scaling is forward's `scale`) or "additive"
    init: str = "xavier"         # "xavier" (every matrix) or "unit_qk": W_Q, W_K give q, k components of variance ≈ 1 (footnote 4)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_encoder_layers", "n_decoder_layers", "d_model", "n_heads", "d_k", "d_v", "d_ff"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id must be a token id below vocab_size, got {self.pad_id!r}")
        for name in ("bos_id", "eos_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a token id (a whole number of at least 0), got {value!r}")
        for name in ("encoder_final_norm", "decoder_final_norm"):
            if not (getattr(self, name) is None or isinstance(getattr(self, name), bool)):
                raise ValueError(f"{name} must be True, False or None, got {getattr(self, name)!r}")
        if self.compatibility not in COMPATIBILITIES:
            raise ValueError(f"compatibility must be one of {COMPATIBILITIES}, got {self.compatibility!r}")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {self.init!r}")

    @property
    def encoder_norm(self) -> bool:
        """Whether the encoder stack ends with a LayerNorm."""
        return self.final_norm if self.encoder_final_norm is None else self.encoder_final_norm

    @property
    def decoder_norm(self) -> bool:
        """Whether the decoder stack ends with a LayerNorm."""
        return self.final_norm if self.decoder_final_norm is None else self.decoder_final_norm

    @classmethod
    def small(cls, vocab_size: int = 99, **overrides) -> "TransformerConfig":
        """A demo/test preset: N=2, d_model=128, h=4, d_k=d_v=32, d_ff=512."""
        sizes = dict(n_encoder_layers=2, n_decoder_layers=2, d_model=128, n_heads=4, d_k=32, d_v=32, d_ff=512)
        return cls(vocab_size=vocab_size, **{**sizes, **overrides})

    def to_dict(self) -> dict:
        """Plain JSON-ready dict; `TransformerConfig(**d)` rebuilds it. Unset per-stack overrides, and §3.2.1's
        options at their defaults (dot product, Xavier), are left out, so a config without them has the same dict
        (and card) as before they existed; so are the start and end tokens at our tokenizer's (<bos> 1, <eos> 2)."""
        left_out = {"encoder_final_norm": None, "decoder_final_norm": None,
                    "compatibility": "dot_product", "init": "xavier", "bos_id": 1, "eos_id": 2}
        return {k: v for k, v in asdict(self).items() if not (k in left_out and v == left_out[k])}
