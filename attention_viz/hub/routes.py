"""Families whose attention does not go through transformers' attention interface, routed through it: per family,
a forward for its attention module that computes q, k, v (and any bias) as the model does, hands them to our Eq. 1
(hub.attention.eq1_attention, where the maps are recorded and the switches act) and goes on as the model does. The
forwards: hub.routes_older (attention written before the interface: GPT-Neo, the original GPT, FSMT, BERT's and BART's
older attention, XLM, RoFormer, GPT-NeoX-Japanese, I-BERT, SqueezeBERT, LUKE), hub.routes_bias (a position bias of
their own: Bloom, MPT, Falcon, MPNet, BEiT, Data2VecVision, XLNet, CPM-Ant), hub.deberta (DeBERTa's disentangled
attention, v1 and v2/v3), hub.routes_local (local attention of long-text models: Longformer, LED, LongT5's local
attention).

Only under an implementation registered in transformers' attention interface (ours, hub.long's, a spy's): under
eager, which the proof on load compares with, the module runs its own forward, transformers' code. transformers will
not switch such a model's implementation (`set_attn_implementation` refuses a model outside the interface), so
`implement` sets its config's directly, which its mask function and its routes read. ROUTES: the attention module's
class, as transformers names it -> its forward.
"""

from __future__ import annotations

import copy
import types

from transformers import PretrainedConfig

from attention_viz.hub.deberta import deberta_attention, deberta_v1_attention
from attention_viz.hub.routes_bias import (W_O_OF_XLNET, ParameterW_O, beit_attention, bloom_attention,
                                           cpmant_attention, data2vec_vision_attention, falcon_attention, mpnet_attention,
                                           mpt_attention, xlnet_attention)
from attention_viz.hub.routes_local import (led_decoder_attention, longformer_attention, longt5_local_attention,
                                           mark_lengths)
from attention_viz.hub.routes_older import (bart_attention, bert_self_attention, fsmt_attention,
                                            gpt_neo_attention, gpt_neox_japanese_attention, ibert_attention,
                                            luke_attention, mark_causal, openai_gpt_attention, roformer_attention,
                                            squeezebert_attention, xlm_attention)

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
          MODELS + "deberta.modeling_deberta.DisentangledSelfAttention": deberta_v1_attention,
          MODELS + "ibert.modeling_ibert.IBertSelfAttention": ibert_attention,
          MODELS + "squeezebert.modeling_squeezebert.SqueezeBertSelfAttention": squeezebert_attention,
          MODELS + "luke.modeling_luke.LukeSelfAttention": luke_attention,
          MODELS + "xlnet.modeling_xlnet.XLNetRelativeAttention": xlnet_attention,
          MODELS + "cpmant.modeling_cpmant.CpmAntAttention": cpmant_attention,
          MODELS + "longformer.modeling_longformer.LongformerSelfAttention": longformer_attention,
          MODELS + "led.modeling_led.LEDEncoderSelfAttention": longformer_attention,
          MODELS + "led.modeling_led.LEDDecoderAttention": led_decoder_attention,
          MODELS + "longt5.modeling_longt5.LongT5LocalAttention": longt5_local_attention}
SCORES_AS_ATTENTIONS = {"squeezebert"}  # model types whose eager `attentions` are the scores before the softmax
                                        # (QKᵀ/√d + mask, as its code returns them): the proof compares their softmax
# Attention across depth, not tokens (Inkling 2's block attention residuals: at each token a learned query over the
# states its earlier blocks left): through the interface, but no map of the text; each such module is given a copy
# of the config under eager, so transformers' own eager function computes it in every pass, outside our Eq. 1.
ACROSS_DEPTH = {MODELS + "inkling2.modeling_inkling2.Inkling2BlockAttentionResidual",
                MODELS + "inkling2_loop.modeling_inkling2_loop.Inkling2LoopBlockAttentionResidual",
                MODELS + "inkling2_loop.modeling_inkling2_loop.Inkling2LoopMessageAttentionResidual"}
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
    for module in list(model.modules()):
        name = f"{type(module).__module__}.{type(module).__name__}"
        if name in ACROSS_DEPTH and getattr(module, "config", None) is not None:
            module.config = copy.copy(module.config)  # its own: implement() leaves it eager
            module.config._attn_implementation = "eager"
        forward = ROUTES.get(name)
        if forward is xlnet_attention and not hasattr(module, W_O_OF_XLNET):  # its W_O, a parameter, as a layer
            module.add_module(W_O_OF_XLNET, ParameterW_O(module, "o"))
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
