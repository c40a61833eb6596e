"""The levers on the model itself: CUDA graphs, Humming, the FP8 and FP32 heads, the router."""
