#!/usr/bin/env bash
# The chaos suite's CI profile: a short, seeded run of tools/chaos (a few
# hundred sagas, every fault kind and crash point at least once, ~4 minutes
# on 2 cores) on its own 3-broker Kafka cluster and PostgreSQL, started
# afresh in a new state dir under $TMPDIR (removed at the end) on ports
# checked free — 19092-19097 and 15432, or the next free set when another
# run holds them — never the shared 9092/5432.
#
# Usage: scripts/chaos.sh [more tools/chaos flags, e.g. -keep]
# Environment knobs: CHAOS_SEED (default 1, so CI runs the same schedule
# every time and a failure is the change's, not the calendar's; try others
# by hand), CHAOS_RELAY (builtin, the default, or debezium: a Kafka Connect
# worker of the run's own publishes the outboxes and is killed and frozen,
# docs/chaos.md), CHAOS_OUT (where the JSON report goes, default
# bin/chaos-report.json, bin/chaos-report-debezium.json with debezium).
# Exits non-zero on any lost, doubled or inconsistent saga, and when the run
# proved too little (unproven): see the verdict in tools/chaos/main.go.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seed="${CHAOS_SEED:-1}"
relay="${CHAOS_RELAY:-builtin}"
if [ "$relay" = builtin ]; then def=bin/chaos-report.json; else def="bin/chaos-report-$relay.json"; fi
out="${CHAOS_OUT:-$def}"
mkdir -p "$(dirname "$out")"
echo "[chaos] seed $seed, relay $relay, report $out" >&2
exec go run ./tools/chaos -short -seed "$seed" -relay "$relay" -out "$out" "$@"
