"""Families whose attention does not go through transformers' attention interface, routed through it: per family,
a forward for its attention module that computes q, k, v (and any bias) as the model does, hands them to our Eq. 1
(hub.attention.eq1_attention, where the maps are recorded and the switches act) and goes on as the model does. The
forwards: hub.routes_older (attention written before the interface: GPT-Neo, the original GPT, FSMT, BERT's and BART's
older attention, XLM, RoFormer, GPT-NeoX-Japanese), hub.routes_bias (a position bias of their own: Bloom, MPT,
Falcon, MPNet, BEiT, Data2VecVision), hub.deberta (DeBERTa v2/v3's disentangled attention), hub.routes_local (local
attention of long-text models: Longformer, LED, LongT5's local attention).

Only under an implementation registered in transformers' attention interface (ours, hub.long's, a spy's): under
eager, which the proof on load compares with, the module runs its own forward, transformers' code. transformers will
not switch such a model's implementation (`set_attn_implementation` refuses a model outside the interface), so
`implement` sets its config's directly, which its mask function and its routes read. ROUTES: the attention module's
class, as transformers names it -> its forward.
"""

from __future__ import annotations

import types

from transformers import PretrainedConfig

from attention_viz.hub.deberta import deberta_attention
from attention_viz.hub.routes_bias import (beit_attention, bloom_attention, data2vec_vision_attention,
                                           falcon_attention, mpnet_attention, mpt_attention)
from attention_viz.hub.routes_local import (led_decoder_attention, longformer_attention, longt5_local_attention,
                                           mark_lengths)
from attention_viz.hub.routes_older import (bart_attention, bert_self_attention, fsmt_attention,
                                            gpt_neo_attention, gpt_neox_japanese_attention, mark_causal,
                                            openai_gpt_attention, roformer_attention, xlm_attention)

ROUTED = "_attention_viz_routed"  # set on a model whose attention modules route() changed

MODELS = "transformers.models."
ROUTES = {MODELS + "bloom.modeling_bloom.BloomAttention": bloom_attention,  # by class, as transformers names it
          MODELS + "gpt_neo.modeling_gpt_neo.GPTNeoSelfAttention": gpt_neo_attention,
          MODELS + "openai.modeling_openai.Attention": openai_gpt_attention,
          MODELS + "fsmt.modeling_fsmt.Attention": fsmt_attention,
          MODELS + "megatron_bert.modeling_megatron_bert.MegatronBertSelfAttention": bert_self_attention,
          MODELS + "rembert.modeling_rembert.RemBertSelfAttention": bert_self_attention,
          MODELS + "tapas.modeling_tapas.TapasSelfAttention": bert_self_attention,
          MODELS + "big_bird.modeling_big_bird.BigBirdSelfAttention": bert_self_attention,
          MODELS + "xglm.modeling_xglm.XGLMAttention": bart_attention,
          MODELS + "trocr.modeling_trocr.TrOCRAttention": bart_attention,
          MODELS + "mvp.modeling_mvp.MvpAttention": bart_attention,
          MODELS + "xlm.modeling_xlm.MultiHeadAttention": xlm_attention,
          MODELS + "flaubert.modeling_flaubert.MultiHeadAttention": xlm_attention,
          MODELS + "mpnet.modeling_mpnet.MPNetSelfAttention": mpnet_attention,
          MODELS + "roformer.modeling_roformer.RoFormerSelfAttention": roformer_attention,
          MODELS + "gpt_neox_japanese.modeling_gpt_neox_japanese.GPTNeoXJapaneseAttention": gpt_neox_japanese_attention,
          MODELS + "beit.modeling_beit.BeitAttention": beit_attention,
          MODELS + "data2vec.modeling_data2vec_vision.Data2VecVisionSelfAttention": data2vec_vision_attention,
          MODELS + "mpt.modeling_mpt.MptAttention": mpt_attention,
          MODELS + "falcon.modeling_falcon.FalconAttention": falcon_attention,
          MODELS + "deberta_v2.modeling_deberta_v2.DisentangledSelfAttention": deberta_attention,
          MODELS + "longformer.modeling_longformer.LongformerSelfAttention": longformer_attention,
          MODELS + "led.modeling_led.LEDEncoderSelfAttention": longformer_attention,
          MODELS + "led.modeling_led.LEDDecoderAttention": led_decoder_attention,
          MODELS + "longt5.modeling_longt5.LongT5LocalAttention": longt5_local_attention}
BUILT_EAGER = {"gpt_neo", "data2vec-vision", "falcon"}  # model types whose modules choose their attention class by
                                                        # the implementation when built: built under eager
                                                        # (transformers' own classes), then routed


def built_under(config, implementation: str) -> str:
    """The implementation a model of this config is built under: eager for BUILT_EAGER's types, else `implementation`."""
    return "eager" if config.model_type in BUILT_EAGER else implementation


def route(model) -> int:
    """Give every attention module of a routed family (ROUTES) its forward through our Eq. 1 (on the instance, the
    class untouched); returns how many were routed."""
    config = model.config
    routed = 0
    for module in model.modules():
        forward = ROUTES.get(f"{type(module).__module__}.{type(module).__name__}")
        if forward is not None and "forward" not in vars(module):
            module.forward = types.MethodType(
                lambda self, *args, _forward=forward, **kwargs: _forward(self, config, *args, **kwargs), module)
            routed += 1
    mark_causal(model)
    mark_lengths(model)
    if routed:
        setattr(model, ROUTED, True)
    return routed


def implement(model, name: str) -> None:
    """model.set_attn_implementation(name), or for a routed model (which transformers will not switch) its configs'
    implementation set directly."""
    if getattr(model, ROUTED, False):  # its config's, and its stacks' own copies (LongT5's decoder reads its own)
        for config in {id(c): c for c in (model.config, *(getattr(m, "config", None) for m in model.modules()))
                       if isinstance(c, PretrainedConfig)}.values():
            config._attn_implementation = name
    else:
        model.set_attn_implementation(name)
