#!/usr/bin/env bash
# Throughput side by side, in one run, on this machine's real Kafka and
# PostgreSQL (scripts/infra.sh): the four services run twice — batched
# (CONSUMER_BATCH=32) and one transaction per event (CONSUMER_BATCH=1) —
# and each time the same seeded open-loop sweep of tools/load finds the
# highest rate sustained with p99 under the bound; then bench/ compares the
# outbox relay with a naive poller and Watermill's SQL forwarder. Results,
# JSON and SVG charts, go to bin/perf/. A benchmark, not a test: run it on
# a quiet machine; the ratios are the result.
#
# Knobs: PERF_SWEEP (from:to:step, default 100:1000:100), PERF_STEP (each
# rate's duration, default 20s), PERF_P99 (default 1s), PERF_MODES
# (default "batched:32 per-event:1"), PERF_LOAD_FLAGS (more tools/load
# flags, e.g. "-customers 1 -skus 1" for a hot key), PERF_OUTBOX=0 to skip
# the outbox comparison, PERF_RELAYS="builtin debezium" to run everything
# on each outbox relay in turn (Debezium on a Kafka Connect worker that
# infra.sh starts; its results are named <mode>-debezium).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

sweep="${PERF_SWEEP:-100:1000:100}"
step="${PERF_STEP:-20s}"
p99="${PERF_P99:-1s}"
modes="${PERF_MODES:-batched:32 per-event:1}"
relays="${PERF_RELAYS:-builtin}"
out=bin/perf
mkdir -p "$out" bin/logs

eval "$(bash scripts/infra.sh up)"
for svc in order payment inventory shipping; do
  go build -o "bin/$svc" "./services/$svc/cmd/$svc"
done
go build -o bin/load ./tools/load
# The services verify tokens with the development key (made once, outside
# the repository); tools/load signs its operator's and customers' tokens
# with the same key.
go build -o bin/choreoctl ./cmd/choreoctl
auth_env="$(bin/choreoctl dev-key)"
while IFS= read -r kv; do export "$kv"; done <<<"$auth_env"

pids=()
stop() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}
trap stop EXIT

for relay in $relays; do
case "$relay" in
  builtin) suffix="" ;;
  debezium)
    suffix="-debezium"
    bash scripts/infra.sh connect-up
    bash scripts/infra.sh connect-register
    ;;
  *) echo "perf.sh: PERF_RELAYS: $relay; want builtin or debezium" >&2; exit 2 ;;
esac
export OUTBOX_RELAY="$relay"
for mode in $modes; do
  name="${mode%%:*}$suffix" batch="${mode##*:}"
  echo "[perf] $name: CONSUMER_BATCH=$batch OUTBOX_RELAY=$relay" >&2
  for svc in order payment inventory shipping; do
    up="${svc^^}"
    url_var="${up}_DATABASE_URL" user_var="${up}_KAFKA_USERNAME" pw_var="${up}_KAFKA_PASSWORD_FILE"
    # Each service as its own Kafka user (scripts/run.sh does the same).
    DATABASE_URL="${!url_var}" KAFKA_BROKERS="$KAFKA_BROKERS" CONSUMER_BATCH="$batch" LOG_LEVEL=WARN \
      KAFKA_USERNAME="${!user_var}" KAFKA_PASSWORD_FILE="${!pw_var}" \
      "bin/$svc" >>"bin/logs/perf-$svc.log" 2>&1 &
    pids+=("$!")
  done
  for port in 8080 8081 8082 8083; do
    for _ in $(seq 1 300); do
      curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
      sleep 0.2
    done
  done
  # Start from an empty pipeline: a backlog left by an earlier run would be
  # measured as this run's latency.
  for _ in $(seq 1 600); do
    lag=0
    for port in 8080 8081 8082 8083; do
      l=$(curl -fsS "http://127.0.0.1:$port/metrics" | awk '/^choreo_consumer_lag\{/ {s += $2} END {print s + 0}')
      lag=$((lag + ${l%.*}))
    done
    [ "$lag" -eq 0 ] && break
    echo "[perf] waiting for a backlog of $lag events to drain" >&2
    sleep 2
  done
  # shellcheck disable=SC2086 # PERF_LOAD_FLAGS is a list of flags
  bin/load -sweep "$sweep" -duration "$step" -p99 "$p99" -progress 0 ${PERF_LOAD_FLAGS:-} \
    -out "$out/$name.json" -chart "$out/$name.svg" | tee "$out/$name.txt"
  stop
done
# Back to the built-in relay: the connectors and their slots go, or the
# slots would hold WAL for ever.
if [ "$relay" = debezium ]; then
  bin/choreoctl connect-remove
fi
done

if [ "${PERF_OUTBOX:-1}" = 1 ]; then
  contenders="relay,naive,watermill"
  case " $relays " in *" debezium "*) contenders="relay,debezium,naive,watermill" ;; esac
  echo "[perf] outbox: $contenders" >&2
  (cd bench && go run ./outbox -rows 20000 -rate 200 -trickle 10s -only "$contenders") | tee "$out/outbox.txt"
fi

echo
echo "highest rate sustained (p99 under $p99):"
for relay in $relays; do
  suffix=""
  [ "$relay" = debezium ] && suffix="-debezium"
  for mode in $modes; do
    name="${mode%%:*}$suffix"
    printf '  %-19s %s\n' "$name" "$(grep -o 'p99 under [^:]*: [0-9.]* orders/s' "$out/$name.txt" | sed 's/.*: //')"
  done
done
