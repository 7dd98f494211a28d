"""Tools built on running models: layer-by-layer comparison with OpenVINO (`comparing`, with
the CPU plugin's int8 arithmetic in `plugin_int8`), cutting and shrinking models (`surgery`),
building IR from Python (`builder`), scoring datasets (`batching`), graph pictures in
DOT/SVG (`drawing`) and what `irrun info` tells of a model (`inspect_model`). It imports `irrun.run`, `irrun.ir` and `irrun.opkit`; never `irrun.ui`.
"""
