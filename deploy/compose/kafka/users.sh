#!/bin/bash
# Creates, once, a random password for each Kafka user of deploy/compose in
# the kafka-users volume: /users/<user>/password, one directory per user so
# that each container mounts only its own (the broker mounts them all).
# The users are the administrator, the controller quorum's and the
# services' (internal/kafkaacl.Grants).
set -euo pipefail
for u in admin controller order payment inventory shipping tracker connect; do
  mkdir -p "/users/$u"
  if [ ! -s "/users/$u/password" ]; then
    od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"/users/$u/password"
    echo "kafka-users: created a password for $u"
  fi
  # Readable by the uid each container runs as; the mounts keep it secret.
  chmod 0755 "/users/$u" && chmod 0444 "/users/$u/password"
done
