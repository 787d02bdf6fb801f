#!/usr/bin/env bash
# Runs every test against real Kafka and PostgreSQL: starts them (idempotent,
# see scripts/infra.sh), vets, runs the package tests, then the end-to-end
# suite on its own — it stops and restarts the shared broker, so no other
# package may be using Kafka at that moment — and last the chaos suite's
# short seeded run on a 3-broker cluster and PostgreSQL of its own
# (scripts/chaos.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

eval "$(bash scripts/infra.sh up)"

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
go test -count=1 -timeout 20m $(go list ./... | grep -v '/e2e$')
go test -count=1 -timeout 30m -v ./e2e
bash scripts/chaos.sh
