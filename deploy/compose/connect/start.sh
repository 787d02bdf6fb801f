#!/bin/bash
# Starts the Kafka Connect worker of compose.yaml's debezium profile. It
# refuses to start unless the services publish with Debezium: with
# OUTBOX_RELAY=builtin their relays and the connectors would both publish
# every row, so the profile without the switch stops here, and with it
# nothing that waits for connect-register starts.
set -euo pipefail
if [ "${OUTBOX_RELAY:-}" != debezium ]; then
  echo "connect: the debezium profile needs OUTBOX_RELAY=debezium (got '${OUTBOX_RELAY:-}'): OUTBOX_RELAY=debezium docker compose --profile debezium up --build" >&2
  exit 2
fi
exec java -Xms128m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true \
  -Dlog4j2.configurationFile=/choreo/log4j2.properties \
  -Djava.security.auth.login.config=/choreo/rest-jaas.conf \
  -cp '/opt/connect/libs/*' org.apache.kafka.connect.cli.ConnectDistributed /choreo/worker.properties
