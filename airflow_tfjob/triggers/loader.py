"""What the triggers' runs need, imported once per process on a thread of its own, off the event loop.

The triggerer imports a trigger's class on its event loop and runs the trigger there, so a trigger's
module only declares (constructor, ``serialize``); each entry point (``run``, ``on_kill``, ``cleanup``)
awaits :func:`load_run_modules` and then imports its run module, already loaded by then. The run
modules import at their top what a run needs (the kubernetes_asyncio client, aiohttp, the cncf hook:
seconds of imports, more on a loaded machine), so importing them here loads it all, once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import importlib
import threading
from collections.abc import Iterator

#: The modules imported off the loop: the triggers' run modules, which import at their top what a run
#: needs (what they reached only inside a function was listed here before; nothing is now).
RUN_MODULES: tuple[str, ...] = (
    "airflow_tfjob.triggers.runs",
    "airflow_tfjob.triggers.asset_runs",
)
_loading: concurrent.futures.Future[None] | None = None
_loading_lock = threading.Lock()


def _import_run_modules(done: concurrent.futures.Future[None]) -> None:
    # The imports allocate a few hundred thousand objects (kubernetes' models), which sets off the
    # cyclic garbage collector's full collections: each walks every object of the process (150 ms
    # and more in a triggerer, measured) holding the GIL, so the event loop's thread waits through
    # it. No collection runs during the imports; then what exists is frozen (gc.freeze, as Airflow's
    # executors do before they fork), so later full collections walk only the objects made since:
    # the triggerer's loop never pays for the modules it has loaded.
    try:
        with _collector_paused():
            for module in RUN_MODULES:
                importlib.import_module(module)
            # Every job API's adapter, which the adapter registry imports by name on first use: that
            # first use is on the loop. Read from the registry here, so no list repeats it.
            from airflow_tfjob.jobs.adapter import ADAPTER_MODULES

            for module in ADAPTER_MODULES.values():
                importlib.import_module(module)
            gc.freeze()
    except BaseException as error:  # told to every waiting trigger; the next one tries again
        global _loading
        with _loading_lock:
            _loading = None
        done.set_exception(error)
    else:
        done.set_result(None)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (on again before any waiting trigger is told)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


async def load_run_modules() -> None:
    """Import :data:`RUN_MODULES` off the event loop, once per process; every trigger awaits the same
    import (a module being imported on another thread must not be imported on the loop meanwhile: the
    loop would wait on its import lock)."""
    global _loading
    with _loading_lock:
        loading = _loading
        if loading is None:
            loading = _loading = concurrent.futures.Future()
            # Running from the start, so that it cannot be cancelled: a trigger cancelled while it waits
            # (a user's mark, a triggerer's shutdown) cancels its own wait, and asyncio.wrap_future would
            # pass that on to this shared future, failing every other trigger of the process with it.
            loading.set_running_or_notify_cancel()
            threading.Thread(
                target=_import_run_modules, args=(loading,), name="tfjob-trigger-imports", daemon=True
            ).start()
    if not loading.done():
        await asyncio.wrap_future(loading)
    loading.result()


def run_modules_loaded() -> bool:
    """Whether :data:`RUN_MODULES` are imported (so an entry point may import its run module on the loop)."""
    loading = _loading
    return loading is not None and loading.done() and loading.exception() is None
