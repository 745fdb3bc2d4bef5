"""The Ray backend: ``SessionHost`` actors hosting many sessions, a ``Supervisor``, and the client.

Used through ``Runtime.start(backend="ray")``, which finds ``start_ray_backend`` by the entry point
``ray`` of the group ``repertory.backends``: nothing below this package imports it, nothing here is
needed for the local backend, and ``repertory.runtime`` never imports Ray.
"""

from repertory._extras import require

require("repertory.actors", "ray")

from repertory.actors.bootstrap import start_ray_backend, start_ray_client  # noqa: E402
from repertory.actors.client import RayHostClient  # noqa: E402
from repertory.actors.host import SessionHost  # noqa: E402
from repertory.actors.names import shared_host_index  # noqa: E402
from repertory.actors.options import RayOptions  # noqa: E402
from repertory.actors.supervisor import Supervisor  # noqa: E402

__all__ = [
    "RayHostClient",
    "RayOptions",
    "SessionHost",
    "Supervisor",
    "shared_host_index",
    "start_ray_backend",
    "start_ray_client",
]
