"""irrun's kernels, one module per spec category; importing this package registers them."""
if __name__ != "irrun.ops":
    # From a source checkout `import ops` would register every kernel a second time.
    raise ImportError("import the kernels as irrun.ops (e.g. `from irrun.ops.sparse import ...`), "
                      "not as a top-level `ops` package")
from . import structural  # noqa: F401
from . import convolution, pooling  # noqa: F401
from . import sparse  # noqa: F401
from . import activation, elementwise, matmul, reduction  # noqa: F401
from . import movement, shape  # noqa: F401
from . import condition, sequence  # noqa: F401
