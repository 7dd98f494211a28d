"""Loops written in LLVM's IR, compiled for this CPU by llvmlite (numba's compiler, installed
with it), for the few kernels whose hot loop numba or NumPy cannot make fast enough.

`compile_ir(ir, signatures)` compiles a module once per process (by its text) and returns
its functions as ctypes callables, {name: fn}, or None where that cannot be done: no
llvmlite, or any failure in LLVM. Callers keep another path for None. ctypes releases the
GIL for each call, so the kit's pool threads run them at once.

Importing llvmlite loads LLVM's shared library: about 40 ms, once per process, which is
why irrun/opkit/f16c.py waits until the work it saves is worth that.
"""
from __future__ import annotations

import ctypes
import functools
import threading

_lock = threading.Lock()
_compiled: dict[str, dict | None] = {}
_engines: list = []        # the execution engines: the functions' code lives as long as they do


def compile_ir(ir: str, signatures: dict[str, tuple]) -> dict | None:
    """{name: ctypes function} for each name -> (restype, *argtypes) of `signatures`,
    compiled from `ir` for the host CPU once per process, or None (see the docstring)."""
    with _lock:
        if ir not in _compiled:
            _compiled[ir] = _compile(ir, signatures)
        return _compiled[ir]


def loaded() -> bool:
    """Whether this process has loaded LLVM already (compiling more IR then costs only the
    compilation, a few milliseconds)."""
    return bool(_engines)


def host_has(feature: str) -> bool:
    """Whether the host CPU has `feature` as LLVM names it ("f16c", "avx512f", ...); False
    without llvmlite."""
    features = _host_features()
    return bool(features and features.get(feature, False))


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset:
    """The CPU's flags as Linux's /proc/cpuinfo names them ("avx512_vnni", "avx512_bf16",
    ...: not always LLVM's names), or an empty set where there is no such file. What
    OpenVINO's CPU plugin computes depends on some of them, which is why irrun and its
    tests ask."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@functools.lru_cache(maxsize=1)
def _host_features() -> dict | None:
    # Asked once per process: LLVM reads them from the CPU each time (0.2 ms a call).
    try:
        import llvmlite.binding as llvm

        return dict(llvm.get_host_cpu_features())
    except Exception:
        return None


def _compile(ir: str, signatures: dict[str, tuple]) -> dict | None:
    try:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        machine = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
            opt=3)
        module = llvm.parse_assembly(ir)
        module.verify()
        # A ctypes signature whose arity is not the function's would pass its arguments
        # into the wrong registers: a crash, or a wrong answer. That is a bug in irrun,
        # and said so below, not a fallback.
        arity = {name: len(list(module.get_function(name).arguments)) for name in signatures}
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        addresses = {name: engine.get_function_address(name) for name in signatures}
    except Exception:         # no llvmlite, an LLVM that rejects the IR: the caller's other path
        return None
    wrong = [f"@{name} takes {arity[name]} arguments, its signature {len(sig) - 1}"
             for name, sig in signatures.items() if arity[name] != len(sig) - 1]
    if wrong:
        raise TypeError("irrun bug: " + "; ".join(wrong))
    if not all(addresses.values()):
        return None
    _engines.append(engine)
    return {name: ctypes.CFUNCTYPE(*signatures[name])(address)
            for name, address in addresses.items()}
