"""Element sizes of the number formats training stores and moves, and FP8's scale blocks."""

BYTES = 2
"""bf16 / fp16 element size."""
FP32_BYTES = 4
"""float32 element size (softmax statistics, cross-entropy logits and their gradient)."""
FP8_BYTES = 1
"""An FP8 (E4M3 / E5M2) element."""
MX_BLOCK = 32
"""Elements per MXFP8 scale (one E8M0 byte; OCP Microscaling Formats spec v1.0)."""
FP8_BLOCK = 128
"""Elements per fp32 scale of blockwise FP8 (1 x 128 activation tiles, 128 x 128 weight
blocks: DeepSeek-V3, arXiv 2412.19437 section 3.3.1)."""
FP8_ELEMENT_BYTES = {"delayed": FP8_BYTES, "tensorwise": FP8_BYTES,
                     "blockwise": FP8_BYTES + FP32_BYTES / FP8_BLOCK,
                     "mxfp8": FP8_BYTES + 1 / MX_BLOCK}
"""Bytes per element of one FP8 copy of a tensor under each recipe (``workload.fp8_recipe``),
its scales included: one per tensor (delayed, tensorwise: negligible), an fp32 per 128
elements (blockwise), an E8M0 byte per 32 (MXFP8)."""
