"""irrun's kernels, one module per spec category; importing this package registers them."""
if __name__ != "irrun.ops":
    # From a source checkout `import ops` would register every kernel a second time.
    raise ImportError("import the kernels as irrun.ops (e.g. `from irrun.ops.sparse import ...`), "
                      "not as a top-level `ops` package")
from . import (  # noqa: F401  # noqa: F401  # noqa: F401  # noqa: F401
    activation,
    condition,
    convolution,
    elementwise,
    matmul,
    movement,
    pooling,
    reduction,
    sequence,
    shape,
    sparse,  # noqa: F401
    structural,  # noqa: F401
)
from . import recurrent, scatter_gather  # noqa: F401,E402
from . import attention, bitwise, classify, linalg, normalization  # noqa: F401,E402
from . import control  # noqa: F401,E402
from . import generation  # noqa: F401,E402
from . import image, quantization, spatial  # noqa: F401,E402
from . import type_promotion  # noqa: F401,E402
from . import movement_extra  # noqa: F401,E402
from . import signal  # noqa: F401,E402
from . import nms  # noqa: F401,E402
from . import detection  # noqa: F401,E402
from . import strings  # noqa: F401,E402
