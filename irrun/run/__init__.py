"""Running a model: from a read IR document to output arrays.

Owns the loading stages that bind ops and infer every shape and type (`program`, `infer`),
constant folding and weight decompression (`decompress`), the executor and its slot plans
(`executor`), the bodies of Loop/TensorIterator/If (`bodies`), plans specialised to one
input signature (`specialize`), feeding and saving arrays (`feed`), the listeners that
trace, profile and dump a run (`inspect`) and the public `Model` and `Session` (`model`).
It imports `irrun.ir`, `irrun.opkit`, `irrun.errors` and `irrun.config`; never
`irrun.tools` or `irrun.ui`.
"""
