"""accel-sim: a cycle-level simulator of accelerators for quantized LLMs."""
