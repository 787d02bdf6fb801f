#!/usr/bin/env bash
# Checks that a Kafka of scripts/infra.sh still accepts SCRAM logins after a
# SCRAM user was created, removed, and the broker restarted (see
# kafka_has_snapshot in scripts/infra.sh: Kafka 4.1.1 loses every
# credential when it replays such a removal from a log without a snapshot).
#
# It runs a Kafka of its own, in a fresh state dir, on SCRAM_CHECK_PORT
# (default 42092) and SCRAM_CHECK_CONTROLLER_PORT (42093): formats it, removes a user whose
# removal comes first in the replayed delta (its name falls into bucket 0 of
# the HashMap; any removal that comes before the other users does the same),
# restarts the broker and logs in as admin. Exits 0 if admin can log in
# after the restart, 1 if not. KAFKA_LIBS_DIR (a directory of Kafka jars, e.g.
# another state dir's kafka-4.1.1/libs) saves the download.
#
# Usage: scripts/scram-restart-check.sh
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Ports of its own, whatever KAFKA_PORT the caller runs its Kafka on.
export CHOREO_INFRA_DIR KAFKA_PORT="${SCRAM_CHECK_PORT:-42092}" KAFKA_CONTROLLER_PORT="${SCRAM_CHECK_CONTROLLER_PORT:-42093}"
CHOREO_INFRA_DIR="$(mktemp -d /tmp/choreo-scram-check.XXXXXX)"
export KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
# One node of the version infra.sh pins, whatever the caller runs.
unset KAFKA_BROKERS_COUNT KAFKA_VERSION
infra() { bash "$SCRIPT_DIR/infra.sh" "$@"; }
cleanup() { infra kafka-stop >/dev/null 2>&1 || true; rm -rf "$CHOREO_INFRA_DIR"; }
trap cleanup EXIT

LIBS="${KAFKA_LIBS_DIR:-$CHOREO_INFRA_DIR/kafka-4.1.1/libs}"
CONF="$CHOREO_INFRA_DIR/kafka-config"
tool() {
  timeout 120 java -Xmx256m -XX:TieredStopAtLevel=1 "-Dlog4j2.configurationFile=$CONF/tools-log4j2.properties" \
    -cp "$LIBS/*" "$@"
}
users() {
  tool kafka.admin.ConfigCommand --bootstrap-server "127.0.0.1:$KAFKA_PORT" \
    --command-config "$CONF/admin.properties" --entity-type users --entity-name gone14 "$@" >/dev/null
}
admin_login() {
  tool org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "127.0.0.1:$KAFKA_PORT" \
    --command-config "$CONF/admin.properties" >/dev/null 2>&1
}

infra kafka-start
users --alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=gone-gone-gone]'
users --alter --delete-config SCRAM-SHA-512
infra kafka-stop
if ! infra kafka-start; then
  echo "FAIL: Kafka did not come back after the restart; its log says:" >&2
  grep -m1 "invalid credentials" "$CHOREO_INFRA_DIR/logs/kafka.log" >&2 || true
  exit 1
fi
if ! admin_login; then
  echo "FAIL: admin cannot log in after the restart" >&2
  exit 1
fi
echo "ok: admin logs in after a SCRAM user's removal and a restart"
