#!/bin/sh
# Starts the test server in the foreground; see the Dockerfile's CMD.
set -e
case "${1:-postgres}" in
postgres) ;;
postgres-pgbouncer)
	# Daemonised; it retries the server until it accepts connections.
	pgbouncer -d /etc/dlock-test/pgbouncer.ini
	;;
postgres-pgbouncer-session)
	sed 's/^pool_mode = transaction$/pool_mode = session/' /etc/dlock-test/pgbouncer.ini >/tmp/pgbouncer-session.ini
	pgbouncer -d /tmp/pgbouncer-session.ini
	;;
*)
	exec "$@"
	;;
esac
exec postgres -D "$PGDATA"
