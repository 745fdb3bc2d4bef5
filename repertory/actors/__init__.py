"""The Ray backend: ``SessionHost`` actors hosting many sessions, a ``Supervisor``, and the client.

Used through ``Runtime.start(backend="ray")``, which finds ``start_ray_backend`` by the entry point
``ray`` of the group ``repertory.backends``: nothing below this package imports it, nothing here is
needed for the local backend, and ``repertory.runtime`` never imports Ray.
"""

from repertory.actors.bootstrap import start_ray_backend, start_ray_client
from repertory.actors.client import RayHostClient
from repertory.actors.host import SessionHost, shared_host_index
from repertory.actors.supervisor import Supervisor

__all__ = ["RayHostClient", "SessionHost", "Supervisor", "shared_host_index", "start_ray_backend", "start_ray_client"]
