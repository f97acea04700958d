"""The same model on a CUDA GPU gives the CPU's numbers. Skipped, saying so, where no GPU is present."""

import pytest
import torch

from attention_viz import Transformer, TransformerConfig, resolve_device, scaled_dot_product_attention

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")


def test_auto_device_picks_what_is_there():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")


@cuda
@pytest.mark.cuda
def test_attention_on_cuda_matches_cpu():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 4, 9, 16).unbind(0)
    mask = torch.ones(9, 9, dtype=torch.bool).tril()
    out, w = scaled_dot_product_attention(q, k, v, mask)
    out_gpu, w_gpu = scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), mask.cuda())
    assert out_gpu.is_cuda and w_gpu.is_cuda
    torch.testing.assert_close(out_gpu.cpu(), out, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(w_gpu.cpu(), w, atol=1e-4, rtol=1e-4)


@cuda
@pytest.mark.cuda
def test_model_and_maps_on_cuda_match_cpu():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.small(vocab_size=20, dropout=0.0)).eval()
    src, tgt = torch.randint(3, 20, (2, 8)), torch.randint(3, 20, (2, 6))
    logits, maps = model(src, tgt)
    gpu = model.to(resolve_device("auto"))
    logits_gpu, maps_gpu = gpu(src.cuda(), tgt.cuda())
    torch.testing.assert_close(logits_gpu.cpu(), logits, atol=1e-4, rtol=1e-4)
    for key in maps:
        assert maps_gpu[key].is_cuda
        torch.testing.assert_close(maps_gpu[key].cpu(), maps[key], atol=1e-4, rtol=1e-4)
    tokens, _ = gpu.greedy_decode(src.cuda(), 5)
    assert tokens.is_cuda


@cuda
@pytest.mark.cuda
def test_importers_keep_the_source_device():
    from torch import nn

    from attention_viz import multihead_attention_from_torch, transformer_from_torch

    ref = nn.Transformer(16, 2, 1, 1, 24, dropout=0.0, batch_first=True).cuda().eval()
    ours = transformer_from_torch(ref, vocab_size=5)
    assert all(t.is_cuda for t in [*ours.parameters(), *ours.buffers()]) and not ours.training
    mha = multihead_attention_from_torch(nn.MultiheadAttention(8, 2, batch_first=True).cuda())
    assert all(p.is_cuda for p in mha.parameters()) and mha.training
