"""irrun's kernels, one module per spec category; importing this package registers them."""
from . import structural  # noqa: F401
