#!/usr/bin/env bash
# Smoke test of a 3-node Kafka cluster from scripts/infra.sh, on its own
# ports and in a throwaway state dir (the shared single node is untouched):
#   1. KAFKA_BROKERS_COUNT=3 infra.sh kafka-start (timed);
#   2. broker.EnsureTopicsWith creates smoke.orders (replication factor 3,
#      min.insync.replicas 2) and smoke.strict (3 and 3), both described:
#      3 replicas per partition, min.insync.replicas set on the topic;
#   3. acks=all produces to both succeed;
#   4. the leader of smoke.orders/0 is killed with SIGKILL; once leadership
#      and ISR have left it (timed), an acks=all produce to smoke.orders still
#      succeeds, and one to smoke.strict is refused with NOT_ENOUGH_REPLICAS
#      (min.insync.replicas is enforced, not just recorded);
#   5. the node is started again (timed), then the cluster is stopped and the
#      state dir removed.
# Exits non-zero if any step fails.
#
# Usage: scripts/infra-cluster-smoke.sh
# Environment knobs: SMOKE_KAFKA_PORT (29092; clients on 29092/29094/29096),
# SMOKE_KAFKA_CONTROLLER_PORT (29093), SMOKE_KEEP=1 keeps the state dir,
# KAFKA_LIBS_DIR (default: the jars of $HOME/.cache/choreo-infra when present,
# so nothing is downloaded), KAFKA_VERSION.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
shared_libs="$HOME/.cache/choreo-infra/kafka-$KAFKA_VERSION/libs"
if [ -z "${KAFKA_LIBS_DIR:-}" ] && [ -f "$shared_libs/.complete" ]; then
  KAFKA_LIBS_DIR="$shared_libs"
fi
SMOKE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/choreo-cluster-smoke.XXXXXX")"
export CHOREO_INFRA_DIR="$SMOKE_DIR/infra" KAFKA_VERSION KAFKA_BROKERS_COUNT=3
export KAFKA_PORT="${SMOKE_KAFKA_PORT:-29092}" KAFKA_CONTROLLER_PORT="${SMOKE_KAFKA_CONTROLLER_PORT:-29093}"
[ -n "${KAFKA_LIBS_DIR:-}" ] && export KAFKA_LIBS_DIR

T0="$(date +%s.%N)"
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1fs", b - a }'; }
say() { printf '[smoke %6s] %s\n' "$(since "$T0")" "$*"; }

cleanup() {
  local rc=$?
  say "tearing down"
  bash scripts/infra.sh kafka-stop || rc=1
  if [ "${SMOKE_KEEP:-}" = 1 ]; then say "state kept in $SMOKE_DIR"; else rm -rf "$SMOKE_DIR"; fi
  if [ "$rc" -eq 0 ]; then say "cluster smoke: OK"; else say "cluster smoke: FAILED (rc $rc)"; fi
  exit "$rc"
}
trap cleanup EXIT

say "building scripts/cluster-smoke"
go build -o "$SMOKE_DIR/cluster-smoke" ./scripts/cluster-smoke
smoke() { "$SMOKE_DIR/cluster-smoke" -brokers "$KAFKA_BROKERS" "$@"; }

say "starting a 3-node cluster in $CHOREO_INFRA_DIR (jars: ${KAFKA_LIBS_DIR:-download})"
t="$(date +%s.%N)"
bash scripts/infra.sh kafka-start
say "cluster started in $(since "$t")"
# The brokers and the administrator's credentials, which cluster-smoke reads.
eval "$(bash scripts/infra.sh env | grep '^export KAFKA_')"
bash scripts/infra.sh env | grep '^export KAFKA_'
bash scripts/infra.sh status | grep '^kafka' || true

say "creating topics"
smoke create -topic smoke.orders -rf 3 -min-isr 2 | tee "$SMOKE_DIR/create.out"
smoke create -topic smoke.strict -rf 3 -min-isr 3
grep -q 'min.insync.replicas=2 (source' "$SMOKE_DIR/create.out" || { say "smoke.orders lacks min.insync.replicas=2"; exit 1; }
if grep '/[0-9]* leader=' "$SMOKE_DIR/create.out" | grep -qv 'replicas=\[[0-9]* [0-9]* [0-9]*\]'; then
  say "a partition of smoke.orders has not 3 replicas"; exit 1
fi

say "producing with all 3 nodes up"
smoke produce -topic smoke.orders -n 20
smoke produce -topic smoke.strict -n 20

victim="$(sed -n 's|^  smoke.orders/0 leader=\([0-9]*\) .*|\1|p' "$SMOKE_DIR/create.out")"
[ -n "$victim" ] || { say "no leader for smoke.orders/0"; exit 1; }
say "kill -9 of node $victim, the leader of smoke.orders/0"
t="$(date +%s.%N)"
bash scripts/infra.sh kafka-kill-node "$victim"
smoke await-failover -topic smoke.orders -dead "$victim"
smoke await-failover -topic smoke.strict -dead "$victim" >/dev/null
say "failover done $(since "$t") after the kill"

say "producing with node $victim dead"
smoke produce -topic smoke.orders -n 20
smoke produce -topic smoke.strict -n 1 -want-error NOT_ENOUGH_REPLICAS

say "restarting node $victim"
t="$(date +%s.%N)"
bash scripts/infra.sh kafka-start-node "$victim"
say "node $victim back in $(since "$t")"
bash scripts/infra.sh status | grep '^kafka' || true
