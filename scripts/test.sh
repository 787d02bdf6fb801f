#!/usr/bin/env bash
# Runs every test against real Kafka and PostgreSQL: starts them and a Kafka
# Connect worker with Debezium (idempotent, see scripts/infra.sh), vets, runs
# the package tests, then the end-to-end suite on its own — it stops and
# restarts the shared broker, so no other package may be using Kafka at that
# moment — on the built-in relay and again on Debezium
# (OUTBOX_RELAY=debezium), and last the chaos suite's short seeded
# run on a 3-broker cluster and PostgreSQL of its own (scripts/chaos.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Captured first: `eval "$(infra.sh up)"` would eval an empty string and
# carry on when infra.sh fails, and the tests would then quietly fall back
# to a fake broker (internal/infra).
if ! exports="$(bash scripts/infra.sh up)"; then
  echo "test.sh: scripts/infra.sh up failed; not running the tests without real Kafka and PostgreSQL" >&2
  exit 1
fi
eval "$exports"
# internal/connect's test and the Debezium e2e run need the worker.
bash scripts/infra.sh connect-up

# Every test binary that uses infrastructure (testenv.Main, e2e) appends a
# line here naming the Kafka and PostgreSQL it used; go test would hide it
# for the packages that pass.
CHOREO_TESTENV_REPORT="$(mktemp)"
export CHOREO_TESTENV_REPORT
# On every exit, a failing one too, print what the packages used.
trap 'show_report; rm -f "$CHOREO_TESTENV_REPORT"' EXIT
show_report() {
  echo "test.sh: infrastructure each package used:"
  sort "$CHOREO_TESTENV_REPORT" | sed 's/^/  /'
}
# check_report fails unless packages reported and every one used what
# infra.sh started (the endpoints it exported: mode "environment").
check_report() {
  if [ ! -s "$CHOREO_TESTENV_REPORT" ]; then
    echo "test.sh: no package reported its infrastructure" >&2
    return 1
  fi
  if awk '$2 != "environment" { bad = 1 } END { exit !bad }' "$CHOREO_TESTENV_REPORT"; then
    echo "test.sh: a package ran on something other than the real Kafka and PostgreSQL (see below)" >&2
    return 1
  fi
}

# The tracker's page is tested in headless Chromium (Debian's package).
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  fi
fi

go vet ./...
# bench/ is a module of its own (it compares with Watermill, which the main
# module must not depend on); keep it compiling.
(cd bench && go vet ./...)
# internal/connect's tests create and remove SCRAM users before the e2e
# suite restarts the broker: Kafka 4.1.1 lost every credential replaying
# such a removal, which infra.sh's first-start snapshot prevents
# (kafka_has_snapshot). scram-restart-check.sh shows it on a Kafka of its
# own, with a removal that always replays first.
go test -count=1 -timeout 20m $(go list ./... | grep -v '/e2e$')
KAFKA_LIBS_DIR="${KAFKA_LIBS_DIR:-${CHOREO_INFRA_DIR:-$HOME/.cache/choreo-infra}/kafka-4.1.1/libs}" bash scripts/scram-restart-check.sh
go test -count=1 -timeout 30m -v ./e2e
# The suite again with Debezium publishing every outbox.
OUTBOX_RELAY=debezium go test -count=1 -timeout 30m -v ./e2e
check_report
bash scripts/chaos.sh
# And on Debezium: its worker killed and frozen under load, the proof that
# nothing is lost or doubled when the relay is a Kafka Connect worker
# (~4.5 minutes; docs/chaos.md).
CHAOS_RELAY=debezium bash scripts/chaos.sh
