"""Device kernel names and op types per MindSpore primitive (what CANN reports for an aclnn kernel).

``kernel_details.csv`` ``Name`` is ``<launch op full name>/<device kernel name>``; ``Type`` is
the CANN op type. HCCL kernels are named ``hcom_<op>__<seq>_<k>_1`` per launch (see
:mod:`.schedule`); TransData kernels are GE-generated ``trans_TransData_<n>``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from advisor_core.simulate.nodes import KernelSpec

__all__ = ["KERNEL_TABLE", "kernel_names", "HCCL_OPS", "on_aicpu"]

# prim → (device kernel name, CANN op type, accelerator core)
KERNEL_TABLE: dict[str, tuple[str, str, str]] = {
    "MatMul": ("aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE"),
    "Cast": ("aclnnCast_CastAiCore_Cast", "Cast", "AI_VECTOR_CORE"),
    "RmsNorm": ("aclnnRmsNorm_RmsNorm_RmsNorm", "RmsNorm", "AI_VECTOR_CORE"),
    "RmsNormGrad": ("aclnnRmsNormGrad_RmsNormGrad_RmsNormGrad", "RmsNormGrad", "AI_VECTOR_CORE"),
    "SiLU": ("aclnnSilu_Swish_Swish", "Swish", "AI_VECTOR_CORE"),
    "SiLUGrad": ("aclnnSiluBackward_SwishGrad_SwishGrad", "SwishGrad", "AI_VECTOR_CORE"),
    "Mul": ("aclnnMul_Mul_Mul", "Mul", "AI_VECTOR_CORE"),
    "Add": ("aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE"),
    "AddN": ("aclnnAddN_AddN_AddN", "AddN", "AI_VECTOR_CORE"),
    "RotaryMul": ("aclnnRotaryPositionEmbedding_RotaryMul_RotaryMul", "RotaryMul", "AI_VECTOR_CORE"),
    "RotaryMulGrad": ("aclnnRotaryPositionEmbeddingGrad_RotaryMulGrad_RotaryMulGrad", "RotaryMulGrad", "AI_VECTOR_CORE"),
    "FlashAttentionScore": (
        "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore", "FlashAttentionScore", "MIX_AIC"),
    "FlashAttentionScoreGrad": (
        "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad", "FlashAttentionScoreGrad", "MIX_AIC"),
    "Transpose": ("aclnnPermute_Transpose_Transpose", "Transpose", "AI_VECTOR_CORE"),
    "TransData": ("trans_TransData_{n}", "TransData", "AI_VECTOR_CORE"),
    "Split": ("aclnnSplitTensor_SplitV_SplitV", "SplitV", "AI_VECTOR_CORE"),
    "Concat": ("aclnnCat_ConcatD_ConcatD", "ConcatD", "AI_VECTOR_CORE"),
    "StridedSlice": ("aclnnStridedSlice_StridedSliceV2_StridedSliceV2", "StridedSliceV2", "AI_VECTOR_CORE"),
    "Gather": ("aclnnEmbedding_GatherV2_GatherV2", "GatherV2", "AI_VECTOR_CORE"),
    "EmbeddingDenseBackward": (
        "aclnnEmbeddingDenseBackward_UnsortedSegmentSum_UnsortedSegmentSum", "UnsortedSegmentSum", "AI_VECTOR_CORE"),
    "SoftmaxCrossEntropyWithLogits": (
        "aclnnCrossEntropyLoss_SoftmaxCrossEntropyWithLogits_SoftmaxCrossEntropyWithLogits",
        "SoftmaxCrossEntropyWithLogits", "AI_VECTOR_CORE"),
    "SoftmaxCrossEntropyWithLogitsGrad": (
        "aclnnCrossEntropyLossGrad_SoftmaxCrossEntropyWithLogitsGrad_SoftmaxCrossEntropyWithLogitsGrad",
        "SoftmaxCrossEntropyWithLogitsGrad", "AI_VECTOR_CORE"),
    "AdamWeightDecay": ("aclnnApplyAdamWV2_ApplyAdamWV2_ApplyAdamWV2", "ApplyAdamWV2", "AI_VECTOR_CORE"),
    "AllReduce": ("hcom_allReduce_", "hcom_allReduce_", "HCCL"),
    "AllGather": ("hcom_allGather_", "hcom_allGather_", "HCCL"),
    "ReduceScatter": ("hcom_reduceScatter_", "hcom_reduceScatter_", "HCCL"),
    "Send": ("hcom_send_", "hcom_send_", "HCCL"),
    "Receive": ("hcom_receive_", "hcom_receive_", "HCCL"),
}

HCCL_OPS = {"AllReduce": "allReduce", "AllGather": "allGather", "ReduceScatter": "reduceScatter", "Send": "send",
            "Receive": "receive"}


def kernel_names(prim: str) -> tuple[str, str, str]:
    return KERNEL_TABLE[prim]


def on_aicpu(k: KernelSpec) -> KernelSpec:
    """``k`` run by AI_CPU instead of an AI core: CANN names the kernel after its op type (``Mul``), one block, no
    AI-core PMU counters; the duration is kept (an assumption: the cost model has no AI_CPU rate)."""
    return replace(k, kernel=k.op_type, core="AI_CPU", block_dim=1, cube_fraction=0.0, vec_fraction=0.0,
                   mte2_fraction=0.0)
