#!/bin/bash
# Starts the Kafka of deploy/compose, in place of the image's entrypoint:
# server.properties from the KAFKA_* variables (KAFKA_FOO_BAR is foo.bar,
# a double underscore a dash, as the image maps them), plus the listeners'
# logins from /users (see users.sh). On the first start it formats the
# storage with every SCRAM user, so the administrator exists before the
# broker serves anyone; scripts/infra.sh does the same outside Docker.
set -euo pipefail
pw() { cat "/users/$1/password"; }
conf=/tmp/server.properties
: >"$conf"
for name in $(compgen -e | grep '^KAFKA_' | sort); do
  case "$name" in KAFKA_HOME|KAFKA_OPTS|KAFKA_HEAP_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_LOG4J_OPTS|KAFKA_GC_LOG_OPTS|KAFKA_JMX_OPTS|KAFKA_DEBUG|KAFKA_VERSION) continue ;; esac
  key="$(printf '%s' "${name#KAFKA_}" | tr '[:upper:]' '[:lower:]' | sed 's/___/\x01/g; s/__/-/g; s/_/./g; s/\x01/_/g')"
  printf '%s=%s\n' "$key" "${!name}" >>"$conf"
done
cat >>"$conf" <<PROPS
listener.name.client.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(pw admin)";
listener.name.external.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" password="$(pw controller)" user_controller="$(pw controller)";
PROPS
# The healthcheck's login (compose.yaml).
cat >/tmp/admin.properties <<PROPS
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(pw admin)";
PROPS
chmod 0600 "$conf" /tmp/admin.properties

data="${KAFKA_LOG_DIRS:?}"
if [ ! -f "$data/meta.properties" ]; then
  scram=()
  for u in admin order payment inventory shipping tracker connect; do
    scram+=(--add-scram "SCRAM-SHA-512=[name=$u,password=$(pw "$u")]")
  done
  /opt/kafka/bin/kafka-storage.sh format -t "${CLUSTER_ID:?}" -c "$conf" "${scram[@]}"
  touch "$data/.choreo-scram"
elif [ ! -f "$data/.choreo-scram" ]; then
  echo "kafka: $data was formatted without SCRAM users (an older compose.yaml); remove the volume: docker compose -f deploy/compose/compose.yaml down -v" >&2
  exit 1
fi
exec /opt/kafka/bin/kafka-server-start.sh "$conf"
