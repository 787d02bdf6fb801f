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
# The debezium profile's Kafka Connect worker: the password of its REST
# user admin, with the users file its PropertyFileLoginModule reads; and
# the directory of its connectors' secrets, which connect-register writes
# and the worker reads, both as the uid 65532 their images run as.
mkdir -p /users/connect-rest
if [ ! -s /users/connect-rest/password ]; then
  od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >/users/connect-rest/password
  echo "kafka-users: created a password for the Connect REST user admin"
fi
printf 'admin: %s\n' "$(cat /users/connect-rest/password)" >/users/connect-rest/users.properties
chmod 0755 /users/connect-rest && chmod 0444 /users/connect-rest/password /users/connect-rest/users.properties
chown 65532:65532 /connect-secrets && chmod 0700 /connect-secrets
