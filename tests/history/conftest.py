from tests.support.postgres import postgres_server  # noqa: F401 - the session's PostgreSQL server
