"""``RayOptions``: what the ``ray`` backend takes beyond what every backend does (``BackendConfig``).

Given to ``Runtime.start(backend="ray", backend_options=RayOptions(...))``, as a mapping there, or
as keywords (``Runtime.start(backend="ray", address=None, hosts=4)``): the runtime hands them over
untouched and ``start_ray_backend`` validates them here, so the generic runtime names none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RayOptions"]


class RayOptions(BaseModel):
    """The Ray backend's options; every field has the default ``Runtime.start`` always had.

    ``address=None`` starts a local Ray instance (stopped again by ``close()``), an address joins a
    cluster (whose detached hosts outlive the runtime). ``hosts`` shared session hosts are found or
    created; ``max_in_flight`` bounds the calls the client pipelines; ``host_options`` are Ray actor
    options for the hosts (resources, ``runtime_env``); ``ray_init`` are keyword arguments for
    ``ray.init`` when this process starts or joins Ray. ``keep_hosts`` (default: keep them when
    joining a cluster) leaves the detached hosts running at ``close()``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    address: str | None = None
    hosts: int = Field(default=2, ge=1)
    max_in_flight: int = Field(default=256, ge=1)
    host_options: dict[str, Any] | None = None
    ray_init: dict[str, Any] | None = None
    keep_hosts: bool | None = None

    @classmethod
    def of(cls, options: object) -> RayOptions:
        """``options`` as ``RayOptions``: the object itself, or a mapping of its fields validated.

        An option it does not have is a ``TypeError`` naming it (as a function refuses an unexpected
        keyword); a value of the wrong type or range is a ``ValueError`` (pydantic's, naming the field).
        """
        if isinstance(options, RayOptions):
            return options
        if not isinstance(options, Mapping):
            raise TypeError(f"backend 'ray' takes RayOptions or a mapping of its fields, not {type(options).__name__}")
        unknown = sorted(str(name) for name in options if name not in cls.model_fields)
        if unknown:
            known = ", ".join(cls.model_fields)
            raise TypeError(f"backend 'ray' got unknown option(s): {', '.join(unknown)}; its options are: {known}")
        return cls.model_validate(dict(options))
