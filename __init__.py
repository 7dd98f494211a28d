"""Not a module of irrun: the root of its source checkout.

Python runs this file only when the checkout's folder is named `irrun` and `import irrun`
runs in the folder above it: the checkout would then shadow the package as an empty
namespace package (`module 'irrun' has no attribute 'read_model'`). Instead this hands the
import over to the installed package (an editable install of this very checkout included),
looked up without the folder above on the path; without an installed irrun it says how to
install one.
"""
import importlib
import os
import sys


def _hand_over():
    here = os.path.dirname(os.path.abspath(__file__))
    above = os.path.dirname(here)
    path = sys.path[:]
    del sys.modules[__name__]
    sys.path[:] = [p for p in path if os.path.abspath(p or os.curdir) != above]
    try:
        package = importlib.import_module(__name__)
    except ImportError as e:
        raise ImportError(
            f"'import {__name__}' found the source checkout {here} (the folder you are in "
            f"holds it) and no installed irrun: install it with `python3 -m pip install -e "
            f"{here}`, or import irrun from another folder") from e
    finally:
        sys.path[:] = path
    # The import system hands out what sys.modules holds under the name once this has run.
    sys.modules[__name__] = package


# Imported under another name (pytest collecting the checkout as a package): nothing to do.
if __name__ == "irrun":
    _hand_over()
