"""The PostgreSQL store (extra ``postgres``): the cluster store, for when one machine is outgrown."""

from repertory._extras import require

require("repertory.storage.postgres", "postgres")

from repertory.storage.postgres.store import PostgresSessionStore  # noqa: E402

__all__ = ["PostgresSessionStore"]
