"""Imported first by the scripts ``model_cases.run_interpreted`` runs: makes Triton's CPU
interpreter skip work it repeats, without changing what a kernel computes.

The interpreter swaps ``triton.language``'s builtins for numpy ones when a kernel is launched
(``_patch_lang``, undone when the launch ends), and again at every call of a ``@triton.jit``
helper inside it (``_row_stats`` and the like), walking the whole language module each time
(``inspect.getmembers``). The helpers' modules are the ones the launch has patched already, so
here a helper's call patches only modules not yet patched in this launch. Measured on the
2-core development machine, ``test_fused_path_in_interpreter``'s script with and without it in
turn: 52.5-59.8 against 62.7-85.8 s over three rounds, every error figure it prints the same
(``docs/experiments/session38/interp_patch_ab.py``, its log beside it). Applied only where
the interpreter has the two names this relies on (the Triton in uv.lock does), and not with
``RWKV_TEST_PLAIN_INTERPRETER=1`` set (to rule it out
when a kernel test fails); otherwise the scripts run on the interpreter as it is."""

from __future__ import annotations

import inspect
import os


def _apply() -> None:
    import triton.language as tl
    from triton.runtime import interpreter

    real_patch = getattr(interpreter, "_patch_lang", None)
    real_launch = getattr(getattr(interpreter, "GridExecutor", None), "__call__", None)
    usable = None not in (real_patch, real_launch) and hasattr(interpreter, "_LangPatchScope")
    if not usable or os.environ.get("RWKV_TEST_PLAIN_INTERPRETER") == "1":
        return
    patched: set[int] = set()  # the language modules patched in the launch running now

    def langs(fn) -> set[int]:  # (as _patch_lang picks them)
        return {id(v) for v in fn.__globals__.values()
                if inspect.ismodule(v) and v in (tl, tl.core)}

    def patch_once(fn):
        mods = langs(fn)
        if mods and mods <= patched:
            return interpreter._LangPatchScope()  # nothing of its own to undo
        scope = real_patch(fn)
        patched.update(mods)
        return scope

    def launch(self, *args, **kwargs):
        patched.clear()  # (the launch's own _patch_lang then patches for real)
        try:
            return real_launch(self, *args, **kwargs)
        finally:
            patched.clear()  # its patches are undone as it ends

    interpreter._patch_lang = patch_once
    interpreter.GridExecutor.__call__ = launch


_apply()
