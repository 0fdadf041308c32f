"""Number formats (ml_dtypes-backed fake quantization) and reference dataflow outputs.

:mod:`accel_sim.quant.formats` holds the formats (INT-b symmetric, MXFP4/MXFP8, NVFP4, FP16);
:mod:`accel_sim.quant.reference` computes Y = X·Wᵀ the way each dataflow does, numerically.
"""

from accel_sim.quant.formats import (
    MX_ELEMENTS,
    fp16,
    int_quantize,
    int_symmetric,
    mse_clip_scale,
    mx,
    mx_quantize,
    nvfp4,
    nvfp4_quantize,
)
from accel_sim.quant.reference import (
    build_osc_table,
    ops_slices,
    osc_channels,
    outlier_channels,
    relative_error,
    y_exact,
    y_fp16,
    y_int16,
    y_llm_int8,
    y_muxq,
    y_mx,
    y_ops,
    y_osc,
    y_w4a4_static,
    y_w8a8,
)

__all__ = [
    "MX_ELEMENTS",
    "build_osc_table",
    "fp16",
    "int_quantize",
    "int_symmetric",
    "mse_clip_scale",
    "mx",
    "mx_quantize",
    "nvfp4",
    "nvfp4_quantize",
    "ops_slices",
    "osc_channels",
    "outlier_channels",
    "relative_error",
    "y_exact",
    "y_fp16",
    "y_int16",
    "y_llm_int8",
    "y_muxq",
    "y_mx",
    "y_ops",
    "y_osc",
    "y_w4a4_static",
    "y_w8a8",
]
