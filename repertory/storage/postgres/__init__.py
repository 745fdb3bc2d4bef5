"""The PostgreSQL store (extra ``postgres``): the cluster store, for when one machine is outgrown."""

from repertory.storage.postgres.store import PostgresSessionStore

__all__ = ["PostgresSessionStore"]
