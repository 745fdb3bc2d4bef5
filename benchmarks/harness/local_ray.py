"""A local Ray instance for one benchmark: started by it, stopped by it, nothing else of Ray touched.

Ray pickles functions and classes by reference unless told otherwise, and a host process need not be
able to import ``benchmarks``: so the whole package is registered to be pickled by value (a model
script, a tool, a host subclass defined here travel with the call).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["local_ray", "pickle_benchmarks_by_value"]


def pickle_benchmarks_by_value() -> None:
    """Make Ray send the ``benchmarks`` package's code with each call instead of a reference to it."""
    import ray

    cloudpickle: Any = ray.cloudpickle  # untyped
    cloudpickle.register_pickle_by_value(sys.modules["benchmarks"])


@contextmanager
def local_ray() -> Iterator[None]:
    """``ray.init(address="local")`` with every core, no dashboard; ``ray.shutdown()`` at the end.

    Refuses to run inside a process where Ray is already initialised: the figures would be of
    someone else's instance, and shutting it down would stop their work.
    """
    import ray

    if ray.is_initialized():
        raise RuntimeError("Ray is already initialised in this process; this benchmark starts its own local instance")
    pickle_benchmarks_by_value()
    ray.init(address="local", num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()  # the instance started above, nothing else
