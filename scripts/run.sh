#!/usr/bin/env bash
# Runs the whole system on this machine, without Docker: starts Kafka and
# PostgreSQL (scripts/infra.sh), builds the four services and the saga
# tracker and runs them on their default ports (order :8080, payment :8081,
# inventory :8082, shipping :8083, tracker :8084), each with its own database. Logs go to bin/logs/.
# Ctrl-C stops the services gracefully; `scripts/infra.sh down` stops the infrastructure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

eval "$(bash scripts/infra.sh up)"

# The tools (redeliver, choreoctl kafka-acls, …) log in to Kafka as the
# administrator from this file when the environment names no user
# (internal/cli.LocalAdminFile computes the same path).
kafka_admin_file="${CHOREO_KAFKA_ADMIN_FILE:-${XDG_CACHE_HOME:-$HOME/.cache}/choreo/kafka-admin-password}"
mkdir -p "$(dirname "$kafka_admin_file")"
(umask 077 && cp "$KAFKA_PASSWORD_FILE" "$kafka_admin_file.tmp" && mv "$kafka_admin_file.tmp" "$kafka_admin_file")

mkdir -p bin/logs

# Every API needs a bearer token: the services verify them with the
# development key (made once, outside the repository, by choreoctl), and
# `choreoctl token` signs them.
go build -o bin/choreoctl ./cmd/choreoctl
auth_env="$(bin/choreoctl dev-key)"
while IFS= read -r kv; do export "$kv"; done <<<"$auth_env"

pids=()
stop() {
  echo "stopping services..." >&2
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait || true
}
trap stop INT TERM EXIT

for svc in order payment inventory shipping tracker; do
  go build -o "bin/$svc" "./services/$svc/cmd/$svc"
done

# OUTBOX_RELAY=debezium make run: Debezium, on a Kafka Connect worker of
# its own, publishes the outboxes in place of each service's relay
# (docs/transactional-outbox.md). Its connectors are registered before the
# services start, which wait for their slots; the services inherit
# OUTBOX_RELAY. Going back to the built-in relay takes the steps
# docs/transactional-outbox.md gives: a stopped worker's slots hold WAL.
relay="${OUTBOX_RELAY:-builtin}"
case "$relay" in
  builtin) ;;
  debezium)
    bash scripts/infra.sh connect-up
    bash scripts/infra.sh connect-register
    ;;
  *) echo "run.sh: OUTBOX_RELAY=$relay; want builtin or debezium" >&2; exit 2 ;;
esac
export OUTBOX_RELAY="$relay"
# Each service runs as its own Kafka user, allowed only its own topics and
# group (internal/kafkaacl); infra.sh exports <SERVICE>_KAFKA_USERNAME and
# <SERVICE>_KAFKA_PASSWORD_FILE.
# On this machine only: HTTP_ADDR's default (:8080…) suits a container, not a laptop.
port=8080
for svc in order payment inventory shipping tracker; do
  up="${svc^^}"
  url_var="${up}_DATABASE_URL" user_var="${up}_KAFKA_USERNAME" pw_var="${up}_KAFKA_PASSWORD_FILE"
  HTTP_ADDR="127.0.0.1:$port" DATABASE_URL="${!url_var}" KAFKA_BROKERS="$KAFKA_BROKERS" \
    KAFKA_USERNAME="${!user_var}" KAFKA_PASSWORD_FILE="${!pw_var}" \
    "bin/$svc" >>"bin/logs/$svc.log" 2>&1 &
  pids+=("$!")
  port=$((port + 1))
done

for port in 8080 8081 8082 8083 8084; do
  for _ in $(seq 1 300); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { echo "service on :$port is not ready; see bin/logs/" >&2; exit 1; }
done
cat >&2 <<TXT
Choreo is running (outbox relay: $relay): order :8080  payment :8081  inventory :8082  shipping :8083  tracker :8084 (open http://localhost:8084/)
Logs: bin/logs/<service>.log     Stop: Ctrl-C
Tokens: OPERATOR=\$(bin/choreoctl token -sub ops -operator); TOKEN=\$(bin/choreoctl token -sub c-1)
  (signed with the development key in $(dirname "$AUTH_PUBLIC_KEY_FILE"))
Admin: bin/choreoctl parked (it signs an operator's token of its own)
Try the walkthrough in README.md, e.g.:
  curl -s -X PUT localhost:8081/accounts/c-1 -H "Authorization: Bearer \$OPERATOR" -H 'Content-Type: application/json' -d '{"balance":10000}'
TXT
wait
