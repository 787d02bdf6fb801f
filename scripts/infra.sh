#!/usr/bin/env bash
# Local infrastructure for Choreo, without Docker:
#   * Apache Kafka 4.x in KRaft mode, run from the official jars on Maven
#     Central (see scripts/kafka/pom.xml): one node by default, or a cluster
#     of KAFKA_BROKERS_COUNT nodes, each a combined broker+controller, all of
#     them voters of the controller quorum;
#   * PostgreSQL from Debian's packages, in a private cluster.
# Both listen on 127.0.0.1 only. State (jars, data, logs, pids) lives in
# ${CHOREO_INFRA_DIR:-$HOME/.cache/choreo-infra}, never in the repository.
#
# Kafka authenticates every client (SASL/SCRAM-SHA-512) and authorizes every
# request (KRaft's StandardAuthorizer, allow.everyone.if.no.acl.found=false):
# an administrator ("admin", a super user) and one user per service (order,
# payment, inventory, shipping, tracker), with random passwords kept in
# $CHOREO_INFRA_DIR/kafka-users/<user>.password (0600), created when the
# storage is formatted. Each start then applies the services' ACLs
# (internal/kafkaacl, through `choreoctl kafka-acls` as admin). `env` exports
# the administrator's credentials as KAFKA_USERNAME/KAFKA_PASSWORD_FILE (for
# tests and tools) and each service's as <SERVICE>_KAFKA_USERNAME/
# <SERVICE>_KAFKA_PASSWORD_FILE (for scripts that start services).
#
# Usage: scripts/infra.sh [up|env|down|status|kafka-start|kafka-stop|
#                          kafka-start-node I|kafka-stop-node I|kafka-kill-node I|
#                          pg-stop|pg-start|pg-restart|
#                          connect-up|connect-down|connect-register]
#   up (default)  install what is missing, start both, create the databases,
#                 print `export` lines on stdout:  eval "$(scripts/infra.sh up)"
#   env           print the export lines only
#   down          stop Kafka (every node) and PostgreSQL
#   kafka-stop    stop only Kafka, every node (data is kept)
#   kafka-start   start only Kafka and wait until every node serves requests
#   kafka-stop-node I   stop node I (1..KAFKA_BROKERS_COUNT) with SIGTERM
#   kafka-kill-node I   kill node I with SIGKILL, as a host crash would
#   kafka-start-node I  start node I again and wait until it serves requests
#   pg-stop       stop only PostgreSQL (fast shutdown: sessions are cut)
#   pg-start      start only PostgreSQL and create the databases if missing
#   pg-restart    pg-stop then pg-start, as a database failover would
#   status        say what runs
#   connect-up    start a Kafka Connect worker (distributed mode) with
#                 Debezium's PostgreSQL connector, for OUTBOX_RELAY=debezium;
#                 Kafka and PostgreSQL must be up. REST on 127.0.0.1:CONNECT_PORT,
#                 as KAFKA_CONNECT_USERNAME with KAFKA_CONNECT_PASSWORD_FILE's
#                 password; connectors' secrets in KAFKA_CONNECT_SECRETS_DIR
#   connect-down  stop the worker (its connectors' offsets stay in Kafka, their
#                 replication slots in PostgreSQL, holding WAL until it is back)
#   connect-register  register (or update) one connector per service database
#                 through the worker's REST API (choreoctl connect-register)
#
# A cluster (KAFKA_BROKERS_COUNT=N, N>1): node I (node.id I) listens for
# clients on KAFKA_PORT+2(I-1) and for the quorum on
# KAFKA_CONTROLLER_PORT+2(I-1) (9092/9094/9096 and 9093/9095/9097 for N=3),
# keeps its data in $CHOREO_INFRA_DIR/kafka-cluster-N/nodeI and logs in
# logs/kafka-cN-nodeI.log; `env` then also exports KAFKA_REPLICATION_FACTOR
# and KAFKA_MIN_INSYNC_REPLICAS. The broker defaults follow N: replication
# factor min(N,3) for new, internal (offsets, transactions, share state)
# topics, min.insync.replicas 2 from three nodes on (1 below). Pass the same
# KAFKA_BROKERS_COUNT to every command of a cluster; down and kafka-stop stop
# every node this state dir runs, whatever the count.
#
# Environment knobs: CHOREO_INFRA_DIR, KAFKA_VERSION (default 4.1.1), KAFKA_PORT
# (9092), KAFKA_CONTROLLER_PORT (9093), KAFKA_BROKERS_COUNT (1),
# KAFKA_START_TIMEOUT (seconds, 180), KAFKA_JVM_OPTS (extra JVM flags),
# KAFKA_LIBS_DIR (a directory of Kafka jars to use instead of downloading them
# into the state dir, e.g. another state dir's kafka-4.1.1/libs), PGPORT (5432),
# CHOREO_MVN_REPO (a Maven local repository to use instead of ~/.m2/repository),
# CONNECT_PORT (the Connect worker's REST port, 8183), DEBEZIUM_VERSION
# (3.6.1.Final).
#
# PostgreSQL runs with wal_level=logical in every mode (Debezium reads the
# outbox from the WAL; the built-in relay does not care), and the worker logs
# in to Kafka as the SCRAM user "connect" (internal/kafkaacl), its connectors
# as their services' users.
# All progress messages go to stderr; stdout carries only the export lines.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
INFRA_DIR="${CHOREO_INFRA_DIR:-$HOME/.cache/choreo-infra}"

KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
KAFKA_HOST=127.0.0.1
KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-180}"
KAFKA_BROKERS_COUNT="${KAFKA_BROKERS_COUNT:-1}"
KAFKA_HOME="$INFRA_DIR/kafka-$KAFKA_VERSION"
KAFKA_LIBS="${KAFKA_LIBS_DIR:-$KAFKA_HOME/libs}"
KAFKA_CLUSTER_DIR="$INFRA_DIR/kafka-cluster-$KAFKA_BROKERS_COUNT"
# Per node, set by kafka_node (node 1 of a single-node setup: these paths).
KAFKA_NODE=1
KAFKA_NODE_PORT="$KAFKA_PORT"
KAFKA_NODE_CONTROLLER_PORT="$KAFKA_CONTROLLER_PORT"
KAFKA_DATA="$INFRA_DIR/kafka-data"
KAFKA_CONF="$INFRA_DIR/kafka-config"

CONNECT_PORT="${CONNECT_PORT:-8183}"
DEBEZIUM_VERSION="${DEBEZIUM_VERSION:-3.6.1.Final}"
CONNECT_HOME="$INFRA_DIR/connect-$KAFKA_VERSION"
CONNECT_LIBS="$CONNECT_HOME/libs"
CONNECT_PLUGINS="$CONNECT_HOME/plugins"
CONNECT_PLUGIN="$CONNECT_PLUGINS/debezium-postgres-$DEBEZIUM_VERSION"
CONNECT_CONF="$INFRA_DIR/connect-config"
CONNECT_PID_FILE="$INFRA_DIR/run/connect.pid"
CONNECT_LOG="$INFRA_DIR/logs/connect.log"
CONNECT_OUT="$INFRA_DIR/logs/connect.out"
# ~10 s on a quiet machine; minutes on a busy 2-core one.
CONNECT_START_TIMEOUT="${CONNECT_START_TIMEOUT:-300}"
# The worker's REST API asks for this user's password (0600 in
# CONNECT_REST_DIR, made on first use), and its connectors' passwords are
# files in CONNECT_SECRETS_DIR (0700), never in their configurations.
CONNECT_REST_USER=admin
CONNECT_REST_DIR="$INFRA_DIR/connect-rest"
CONNECT_SECRETS_DIR="$INFRA_DIR/connect-secrets"

PG_HOST=127.0.0.1
PG_PORT="${PGPORT:-5432}"
PG_USER=postgres
PG_ROOT="$INFRA_DIR/postgres"
PG_DATA="$PG_ROOT/data"
PG_SOCK="$PG_ROOT/run"
DATABASES=(order_db payment_db inventory_db shipping_db tracker_db choreo_test)

LOG_DIR="$INFRA_DIR/logs"
RUN_DIR="$INFRA_DIR/run"
KAFKA_PID_FILE="$RUN_DIR/kafka.pid"
KAFKA_LOG="$LOG_DIR/kafka.log"
KAFKA_OUT="$LOG_DIR/kafka.out"

KAFKA_USERS_DIR="$INFRA_DIR/kafka-users"
# The SCRAM users: the administrator, one per service and the Connect worker
# (internal/kafkaacl.Grants).
KAFKA_USERS=(admin order payment inventory shipping tracker connect)

log() { printf '[infra] %s\n' "$*" >&2; }
die() { printf '[infra] ERROR: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- helpers ---

pg_url() { printf 'postgres://%s@%s:%s/%s?sslmode=disable' "$PG_USER" "$PG_HOST" "$PG_PORT" "$1"; }

print_env() {
  echo "export KAFKA_BROKERS=$(kafka_bootstrap)"
  echo "export KAFKA_USERNAME=admin"
  echo "export KAFKA_PASSWORD_FILE=$KAFKA_USERS_DIR/admin.password"
  local u
  for u in "${KAFKA_USERS[@]:1}"; do
    echo "export ${u^^}_KAFKA_USERNAME=$u"
    echo "export ${u^^}_KAFKA_PASSWORD_FILE=$KAFKA_USERS_DIR/$u.password"
  done
  if [ "$KAFKA_BROKERS_COUNT" -gt 1 ]; then
    echo "export KAFKA_REPLICATION_FACTOR=$(kafka_default_rf)"
    echo "export KAFKA_MIN_INSYNC_REPLICAS=$(kafka_default_min_isr)"
  fi
  echo "export ORDER_DATABASE_URL=$(pg_url order_db)"
  echo "export PAYMENT_DATABASE_URL=$(pg_url payment_db)"
  echo "export INVENTORY_DATABASE_URL=$(pg_url inventory_db)"
  echo "export SHIPPING_DATABASE_URL=$(pg_url shipping_db)"
  echo "export TRACKER_DATABASE_URL=$(pg_url tracker_db)"
  echo "export TEST_DATABASE_URL=$(pg_url choreo_test)"
  echo "export KAFKA_CONNECT_URL=http://$KAFKA_HOST:$CONNECT_PORT"
  echo "export KAFKA_CONNECT_USERNAME=$CONNECT_REST_USER"
  echo "export KAFKA_CONNECT_PASSWORD_FILE=$CONNECT_REST_DIR/$CONNECT_REST_USER.password"
  echo "export KAFKA_CONNECT_SECRETS_DIR=$CONNECT_SECRETS_DIR"
}

port_open() { timeout 2 bash -c "exec 9<>/dev/tcp/$1/$2" 2>/dev/null; }

now() { date +%s; }

# One infra.sh at a time per data dir (fd 8). Daemons are started with fd 8
# (and fd 3, the saved stdout) closed so they neither hold the lock nor keep
# a `$(infra.sh up)` command substitution waiting.
take_lock() {
  mkdir -p "$INFRA_DIR" "$LOG_DIR" "$RUN_DIR"
  exec 8>"$INFRA_DIR/.lock"
  flock -w 900 8 || die "another infra.sh holds $INFRA_DIR/.lock"
}

apt_install() {
  [ "$(id -u)" -eq 0 ] || die "need root to apt-get install $*"
  log "installing Debian packages: $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "$@" >&2
}

# ------------------------------------------------------------------ kafka ---

# Checks KAFKA_BROKERS_COUNT and that no two nodes share a port.
kafka_check_layout() {
  case "$KAFKA_BROKERS_COUNT" in
    [1-9]) ;;
    *) die "KAFKA_BROKERS_COUNT=$KAFKA_BROKERS_COUNT: want a number of nodes from 1 to 9" ;;
  esac
  local i ports=()
  for ((i = 1; i <= KAFKA_BROKERS_COUNT; i++)); do
    ports+=("$((KAFKA_PORT + 2 * (i - 1)))" "$((KAFKA_CONTROLLER_PORT + 2 * (i - 1)))")
  done
  [ "$(printf '%s\n' "${ports[@]}" | sort -u | wc -l)" -eq "${#ports[@]}" ] \
    || die "KAFKA_PORT=$KAFKA_PORT and KAFKA_CONTROLLER_PORT=$KAFKA_CONTROLLER_PORT give $KAFKA_BROKERS_COUNT nodes overlapping ports (${ports[*]}); nodes step by 2"
}

# Checks a node number given on the command line.
kafka_check_node() {
  if ! [[ "${1:-}" =~ ^[1-9]$ ]] || [ "$1" -gt "$KAFKA_BROKERS_COUNT" ]; then
    die "node '${1:-}': want a number from 1 to KAFKA_BROKERS_COUNT ($KAFKA_BROKERS_COUNT)"
  fi
}

# Selects node $1: its ports, config, data, pid file and logs. A single node
# keeps the paths of the single-node setup (kafka-data, kafka.log, kafka.pid).
kafka_node() {
  KAFKA_NODE="$1"
  KAFKA_NODE_PORT=$((KAFKA_PORT + 2 * (KAFKA_NODE - 1)))
  KAFKA_NODE_CONTROLLER_PORT=$((KAFKA_CONTROLLER_PORT + 2 * (KAFKA_NODE - 1)))
  if [ "$KAFKA_BROKERS_COUNT" -eq 1 ]; then
    KAFKA_DATA="$INFRA_DIR/kafka-data"
    KAFKA_CONF="$INFRA_DIR/kafka-config"
    KAFKA_PID_FILE="$RUN_DIR/kafka.pid"
    KAFKA_LOG="$LOG_DIR/kafka.log"
    KAFKA_OUT="$LOG_DIR/kafka.out"
  else
    KAFKA_DATA="$KAFKA_CLUSTER_DIR/node$KAFKA_NODE/data"
    KAFKA_CONF="$KAFKA_CLUSTER_DIR/node$KAFKA_NODE/config"
    KAFKA_PID_FILE="$RUN_DIR/kafka-c$KAFKA_BROKERS_COUNT-node$KAFKA_NODE.pid"
    KAFKA_LOG="$LOG_DIR/kafka-c$KAFKA_BROKERS_COUNT-node$KAFKA_NODE.log"
    KAFKA_OUT="$LOG_DIR/kafka-c$KAFKA_BROKERS_COUNT-node$KAFKA_NODE.out"
  fi
}

# "Kafka" for a single node, "Kafka node I" in a cluster.
kafka_name() {
  if [ "$KAFKA_BROKERS_COUNT" -eq 1 ]; then echo Kafka; else echo "Kafka node $KAFKA_NODE"; fi
}

# The client addresses of all nodes, comma-separated (KAFKA_BROKERS).
kafka_bootstrap() {
  local i out=""
  for ((i = 1; i <= KAFKA_BROKERS_COUNT; i++)); do
    out+="${out:+,}$KAFKA_HOST:$((KAFKA_PORT + 2 * (i - 1)))"
  done
  echo "$out"
}

# Replication defaults for the cluster size: RF min(N,3); min ISR 2 from RF 3.
kafka_default_rf() { echo $((KAFKA_BROKERS_COUNT < 3 ? KAFKA_BROKERS_COUNT : 3)); }
kafka_default_min_isr() { echo $(($(kafka_default_rf) >= 3 ? 2 : 1)); }

ensure_java_maven() {
  local missing=()
  command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  local major
  major="$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')"
  [ "${major%%.*}" -ge 17 ] 2>/dev/null || die "Kafka 4 needs Java 17+, found '${major:-?}'"
}

kafka_fetch() {
  [ -f "$KAFKA_LIBS/.complete" ] && return 0
  ensure_java_maven
  log "downloading Kafka $KAFKA_VERSION jars from Maven Central into $KAFKA_LIBS"
  mkdir -p "$KAFKA_HOME"
  cp "$SCRIPT_DIR/kafka/pom.xml" "$KAFKA_HOME/pom.xml"
  rm -rf "$KAFKA_LIBS.tmp"
  local mvn_args=(-q -B -Dstyle.color=never -f "$KAFKA_HOME/pom.xml"
    "-Dkafka.version=$KAFKA_VERSION" dependency:copy-dependencies
    -DincludeScope=runtime "-DoutputDirectory=$KAFKA_LIBS.tmp")
  [ -n "${CHOREO_MVN_REPO:-}" ] && mvn_args+=("-Dmaven.repo.local=$CHOREO_MVN_REPO")
  mvn "${mvn_args[@]}" >"$LOG_DIR/kafka-fetch.log" 2>&1 \
    || { tail -n 40 "$LOG_DIR/kafka-fetch.log" >&2; die "mvn could not fetch Kafka $KAFKA_VERSION"; }
  [ -f "$KAFKA_LIBS.tmp/kafka_2.13-$KAFKA_VERSION.jar" ] \
    || die "kafka_2.13-$KAFKA_VERSION.jar missing after mvn"
  rm -rf "$KAFKA_LIBS"
  mv "$KAFKA_LIBS.tmp" "$KAFKA_LIBS"
  touch "$KAFKA_LIBS/.complete"
  log "Kafka jars: $(find "$KAFKA_LIBS" -name '*.jar' | wc -l) files, $(du -sh "$KAFKA_LIBS" | cut -f1)"
}

# The quorum lines of the selected node's server.properties: a single node
# bootstraps a dynamic quorum of itself (formatted --standalone), a cluster
# has a static quorum of all its nodes.
kafka_quorum_config() {
  if [ "$KAFKA_BROKERS_COUNT" -eq 1 ]; then
    echo "controller.quorum.bootstrap.servers=$KAFKA_HOST:$KAFKA_NODE_CONTROLLER_PORT"
    return 0
  fi
  local i voters=""
  for ((i = 1; i <= KAFKA_BROKERS_COUNT; i++)); do
    voters+="${voters:+,}$i@$KAFKA_HOST:$((KAFKA_CONTROLLER_PORT + 2 * (i - 1)))"
  done
  echo "controller.quorum.voters=$voters"
}

# Creates a random password for every user that has none yet, and the
# controller's (see kafka_write_config), in $KAFKA_USERS_DIR (0700, files
# 0600). They live as long as the state dir: the users are formatted into
# the storage with them.
kafka_passwords() {
  (umask 077 && mkdir -p "$KAFKA_USERS_DIR")
  local u
  for u in "${KAFKA_USERS[@]}" controller; do
    [ -s "$KAFKA_USERS_DIR/$u.password" ] && continue
    (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$KAFKA_USERS_DIR/$u.password")
  done
}

kafka_password() { cat "$KAFKA_USERS_DIR/$1.password"; }

# Whether the selected node holds a metadata snapshot besides the empty one
# format writes (00000000000000000000-0000000000.checkpoint).
#
# Kafka 4.1.1 loses every SCRAM credential when a node starts from a
# metadata log that has no such snapshot and in which a user was removed:
# the MetadataLoader replays the whole log into one ScramDelta over an empty
# image, and ScramDelta.apply drops the mechanism's user map as soon as a
# removal leaves it empty, which it does when that removal comes first in
# the delta's HashMap order; the users it puts after that go into the
# dropped map. The broker then refuses every SCRAM login, admin's too
# ("invalid credentials"), on every start, though the log still holds them.
# Over an image that holds admin (never removed) no removal empties the map,
# so every node takes a snapshot on its first start, before any client can
# remove a user (kafka_first_snapshot), and later starts replay from it.
kafka_has_snapshot() {
  local f
  for f in "$KAFKA_DATA"/__cluster_metadata-0/*.checkpoint; do
    [ -f "$f" ] || continue
    [ "${f##*/}" = 00000000000000000000-0000000000.checkpoint ] && continue
    return 0
  done
  return 1
}

# Who can reach which listener, and as whom (both bind 127.0.0.1):
#   CLIENT (KAFKA_PORT): SASL_PLAINTEXT, SCRAM-SHA-512 only. Clients and the
#     brokers' replication (inter.broker.listener.name) use it; a broker
#     authenticates as admin, a super user, whose SCRAM credential is
#     formatted into the storage with the others, so it exists before any
#     broker fetches metadata.
#   CONTROLLER (KAFKA_CONTROLLER_PORT): SASL_PLAINTEXT with PLAIN, as the
#     user "controller", whose password is only in this node's
#     server.properties (0600). KRaft reads SCRAM credentials from the
#     metadata the controllers serve, so the quorum cannot use them; PLAIN
#     with a static user keeps it closed to any local process that cannot
#     read the file. PLAINTEXT there would make every local process the
#     ANONYMOUS principal, which would have to be a super user for the
#     quorum to work: an open door to the metadata log (credentials, ACLs).
kafka_write_config() {
  mkdir -p "$KAFKA_CONF" "$KAFKA_DATA"
  kafka_passwords
  local rf min_isr admin_pw controller_pw
  rf="$(kafka_default_rf)"
  min_isr="$(kafka_default_min_isr)"
  admin_pw="$(kafka_password admin)"
  controller_pw="$(kafka_password controller)"
  (umask 077 && cat >"$KAFKA_CONF/server.properties") <<EOF
# generated by scripts/infra.sh -- rewritten on every start
process.roles=broker,controller
node.id=$KAFKA_NODE
$(kafka_quorum_config)
listeners=CLIENT://$KAFKA_HOST:$KAFKA_NODE_PORT,CONTROLLER://$KAFKA_HOST:$KAFKA_NODE_CONTROLLER_PORT
advertised.listeners=CLIENT://$KAFKA_HOST:$KAFKA_NODE_PORT,CONTROLLER://$KAFKA_HOST:$KAFKA_NODE_CONTROLLER_PORT
inter.broker.listener.name=CLIENT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT
listener.name.client.sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.client.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin_pw";
listener.name.controller.sasl.enabled.mechanisms=PLAIN
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" password="$controller_pw" user_controller="$controller_pw";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:admin;User:controller
log.dirs=$KAFKA_DATA
num.partitions=3
default.replication.factor=$rf
min.insync.replicas=$min_isr
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$min_isr
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
num.network.threads=3
num.io.threads=4
log.retention.hours=168
$(kafka_has_snapshot || printf '%s\n' "# no metadata snapshot yet: one within a second (kafka_first_snapshot)" "metadata.log.max.snapshot.interval.ms=1000")
EOF
  cat >"$KAFKA_CONF/log4j2.properties" <<EOF
# broker logging: INFO (noisy loggers at WARN) into $KAFKA_LOG, nothing on the terminal
status = warn
name = choreo-kafka
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = $KAFKA_LOG
appender.file.filePattern = $KAFKA_LOG.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = WARN
logger.storage.name = org.apache.kafka.storage.internals.log
logger.storage.level = WARN
EOF
  cat >"$KAFKA_CONF/tools-log4j2.properties" <<'EOF'
# CLI tools: warnings only, on stderr
status = warn
name = choreo-kafka-tools
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
EOF
  # The CLI tools below connect as admin.
  (umask 077 && cat >"$KAFKA_CONF/admin.properties") <<EOF
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin_pw";
EOF
}

# Run a Kafka class (CLI tool) on the cached classpath; its stdout stays stdout.
kafka_tool() {
  timeout "${KAFKA_TOOL_TIMEOUT:-600}" java -Xms32m -Xmx256m -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=$KAFKA_CONF/tools-log4j2.properties" \
    -cp "$KAFKA_LIBS/*" "$@"
}

# Formats the selected node's storage once. A cluster's nodes share one
# cluster id, kept in $KAFKA_CLUSTER_DIR/cluster.id.
kafka_format() {
  if [ -f "$KAFKA_DATA/meta.properties" ]; then
    [ -f "$KAFKA_DATA/.choreo-scram" ] \
      || die "$KAFKA_DATA was formatted without SCRAM users (by an older infra.sh); stop Kafka and remove it (rm -rf $KAFKA_DATA), or set another CHOREO_INFRA_DIR"
    return 0
  fi
  local cluster_id format_log="$LOG_DIR/kafka-format.log" mode=(--standalone)
  if [ "$KAFKA_BROKERS_COUNT" -gt 1 ]; then
    format_log="$LOG_DIR/kafka-c$KAFKA_BROKERS_COUNT-format.log"
    mode=()   # static quorum (controller.quorum.voters): no quorum flag
    cluster_id="$(cat "$KAFKA_CLUSTER_DIR/cluster.id" 2>/dev/null || true)"
  fi
  if [ -z "${cluster_id:-}" ]; then
    cluster_id="$(kafka_tool kafka.tools.StorageTool random-uuid 2>>"$format_log" | tail -n1)"
    [ -n "$cluster_id" ] || die "StorageTool random-uuid failed, see $format_log"
    if [ "$KAFKA_BROKERS_COUNT" -gt 1 ]; then
      mkdir -p "$KAFKA_CLUSTER_DIR"
      echo "$cluster_id" >"$KAFKA_CLUSTER_DIR/cluster.id"
    fi
  fi
  local u scram=()
  for u in "${KAFKA_USERS[@]}"; do
    scram+=(--add-scram "SCRAM-SHA-512=[name=$u,password=$(kafka_password "$u")]")
  done
  log "formatting KRaft storage in $KAFKA_DATA (cluster id $cluster_id, SCRAM users ${KAFKA_USERS[*]})"
  kafka_tool kafka.tools.StorageTool format "${mode[@]}" -t "$cluster_id" "${scram[@]}" \
      -c "$KAFKA_CONF/server.properties" >>"$format_log" 2>&1 \
    || { tail -n 30 "$format_log" >&2; die "formatting Kafka storage failed"; }
  touch "$KAFKA_DATA/.choreo-scram"
}

# Prints the pid of the selected node if it runs.
kafka_pid() {
  local pid
  [ -f "$KAFKA_PID_FILE" ] || return 1
  pid="$(cat "$KAFKA_PID_FILE" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $KAFKA_CONF/server.properties" || return 1
  echo "$pid"
}

# True when a broker answers a metadata request on the selected node's port.
kafka_answers() {
  KAFKA_TOOL_TIMEOUT=60 kafka_tool org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$KAFKA_HOST:$KAFKA_NODE_PORT" --command-config "$KAFKA_CONF/admin.properties" --list >/dev/null 2>&1
}

# Prints the ids of the brokers that answer an ApiVersions request (the
# live, unfenced brokers of the cluster's metadata), one a line.
kafka_live_ids() {
  KAFKA_TOOL_TIMEOUT=60 kafka_tool org.apache.kafka.tools.BrokerApiVersionsCommand \
      --bootstrap-server "$(kafka_bootstrap)" --command-config "$KAFKA_CONF/admin.properties" 2>/dev/null \
    | sed -n 's/^[^ ]* (id: \([0-9]*\) .*/\1/p' | sort -u
}

kafka_fail() {
  log "---- last lines of $KAFKA_LOG ----"
  tail -n 40 "$KAFKA_LOG" >&2 2>/dev/null || true
  log "---- last lines of $KAFKA_OUT ----"
  tail -n 20 "$KAFKA_OUT" >&2 2>/dev/null || true
  if [ -n "${KAFKA_LOG_OFFSET:-}" ] && kafka_log_since_launch | grep -q "invalid credentials with SASL mechanism SCRAM"; then
    log "the broker refuses admin's SCRAM login: if no password file in $KAFKA_USERS_DIR changed, it lost its credentials replaying a user's removal (Kafka 4.1.1, see kafka_has_snapshot in scripts/infra.sh); only a new storage recovers: stop Kafka and rm -rf $KAFKA_DATA"
  fi
  die "$*"
}

# Starts the selected node's process unless it runs; does not wait. Sets
# KAFKA_LAUNCHED to the new pid, "running" (ours, already up) or "foreign"
# (a broker not started by this script answers on the port), and
# KAFKA_NEEDS_SNAPSHOT to 1 when it starts one without a metadata snapshot.
kafka_launch() {
  local pid name
  name="$(kafka_name)"
  KAFKA_LAUNCHED="" KAFKA_NEEDS_SNAPSHOT=0
  if pid="$(kafka_pid)"; then
    KAFKA_LAUNCHED=running
    return 0
  fi
  rm -f "$KAFKA_PID_FILE"
  if port_open "$KAFKA_HOST" "$KAFKA_NODE_PORT"; then
    [ -f "$KAFKA_LIBS/.complete" ] || kafka_fetch
    kafka_write_config
    if [ "$KAFKA_BROKERS_COUNT" -eq 1 ] && kafka_answers; then
      KAFKA_LAUNCHED=foreign
      return 0
    fi
    die "port $KAFKA_HOST:$KAFKA_NODE_PORT is taken by something that is not a working Kafka broker"
  fi
  kafka_fetch
  kafka_write_config
  kafka_format
  KAFKA_NEEDS_SNAPSHOT=0
  kafka_has_snapshot || KAFKA_NEEDS_SNAPSHOT=1

  KAFKA_LOG_OFFSET=0 KAFKA_LOG_INODE=""
  if [ -f "$KAFKA_LOG" ]; then
    KAFKA_LOG_OFFSET="$(stat -c %s "$KAFKA_LOG")"
    KAFKA_LOG_INODE="$(stat -c %i "$KAFKA_LOG")"
  fi
  log "starting Kafka $KAFKA_VERSION (KRaft, node $KAFKA_NODE) on $KAFKA_HOST:$KAFKA_NODE_PORT, controller :$KAFKA_NODE_CONTROLLER_PORT"
  printf '\n==== %s starting %s %s ====\n' "$(date -Is)" "$name" "$KAFKA_VERSION" >>"$KAFKA_OUT"
  mkdir -p "$KAFKA_HOME"
  # shellcheck disable=SC2086,SC2016  # KAFKA_JVM_OPTS is split on purpose; $$ is the child's
  (cd "$KAFKA_HOME" && exec setsid nohup bash -c 'echo $$ >"$0"; exec "$@"' "$KAFKA_PID_FILE" \
    java -Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExplicitGCInvokesConcurrent \
      -Djava.awt.headless=true "-Dkafka.logs.dir=$LOG_DIR" \
      "-Dlog4j2.configurationFile=$KAFKA_CONF/log4j2.properties" ${KAFKA_JVM_OPTS:-} \
      -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_CONF/server.properties") \
    </dev/null >>"$KAFKA_OUT" 2>&1 3>&- 8>&- &

  local deadline=$(( $(now) + KAFKA_START_TIMEOUT ))
  pid=""
  while [ "$(now)" -lt "$deadline" ]; do
    pid="$(kafka_pid)" && break
    sleep 0.2
  done
  [ -n "$pid" ] || kafka_fail "$name process did not come up"
  KAFKA_LAUNCHED="$pid"
}

# Prints what the selected node logged since kafka_launch noted the log's
# size (KAFKA_LOG_OFFSET) and inode (KAFKA_LOG_INODE). log4j rolls the log
# at 50 MB, renaming it to $KAFKA_LOG.N: a start whose lines straddle the
# roll is then in the rest of the rolled file (found by its inode) and the
# new file. Reading the new file from the old offset instead finds nothing,
# and a node that started in seconds "did not start within 180s" (this
# happened in a state dir reused over many runs).
kafka_log_since_launch() {
  local rolled
  if [ -z "${KAFKA_LOG_INODE:-}" ] || [ "$(stat -c %i "$KAFKA_LOG" 2>/dev/null)" = "$KAFKA_LOG_INODE" ]; then
    tail -c +"$((KAFKA_LOG_OFFSET + 1))" "$KAFKA_LOG" 2>/dev/null
    return 0
  fi
  rolled="$(find "$LOG_DIR" -maxdepth 1 -name "$(basename "$KAFKA_LOG").*" -inum "$KAFKA_LOG_INODE" 2>/dev/null | head -n1)"
  if [ -n "$rolled" ]; then tail -c +"$((KAFKA_LOG_OFFSET + 1))" "$rolled" 2>/dev/null; fi
  cat "$KAFKA_LOG" 2>/dev/null || true
}

# Runs the command given (after the first four arguments) every second
# until it succeeds, as long as Kafka's process lives: it fails saying $1
# (pid $2) exited if the process is gone, and with the message $4 once the
# deadline $3 (epoch seconds) has passed.
kafka_await() {
  local name="$1" pid="$2" deadline="$3" late="$4"
  shift 4
  until "$@"; do
    kill -0 "$pid" 2>/dev/null || kafka_fail "$name (pid $pid) exited"
    [ "$(now)" -lt "$deadline" ] || kafka_fail "$late"
    sleep 1
  done
}

# Waits until the node kafka_launch started logs "Kafka Server started" and
# listens (a node already running: until it listens).
kafka_wait_started() {
  local pid name deadline
  name="$(kafka_name)"
  deadline=$(( $(now) + KAFKA_START_TIMEOUT ))
  case "$KAFKA_LAUNCHED" in
    foreign) return 0 ;;
    running)
      pid="$(kafka_pid)" || kafka_fail "$name exited"
      if ! port_open "$KAFKA_HOST" "$KAFKA_NODE_PORT"; then
        log "$name process $pid exists but does not listen yet; waiting"
        kafka_write_config
        kafka_await "$name" "$pid" "$deadline" "$name (pid $pid) does not answer on $KAFKA_HOST:$KAFKA_NODE_PORT" \
          port_open "$KAFKA_HOST" "$KAFKA_NODE_PORT"
      fi
      return 0 ;;
  esac
  pid="$KAFKA_LAUNCHED"
  while :; do
    kill -0 "$pid" 2>/dev/null || kafka_fail "$name (pid $pid) exited during startup"
    if port_open "$KAFKA_HOST" "$KAFKA_NODE_PORT" &&
       kafka_log_since_launch | grep -q "Kafka Server started"; then
      break
    fi
    [ "$(now)" -lt "$deadline" ] || kafka_fail "$name did not start within ${KAFKA_START_TIMEOUT}s"
    sleep 0.5
  done
}

# The selected node, started (kafka_launch) without a metadata snapshot and
# so with a snapshot interval of a second: waits for its first snapshot,
# then restarts it with the default interval (see kafka_has_snapshot).
kafka_first_snapshot() {
  [ "${KAFKA_NEEDS_SNAPSHOT:-0}" = 1 ] || return 0
  local name pid deadline
  name="$(kafka_name)"
  pid="$(kafka_pid)" || kafka_fail "$name exited during startup"
  deadline=$(( $(now) + KAFKA_START_TIMEOUT ))
  while ! kafka_has_snapshot; do
    kill -0 "$pid" 2>/dev/null || kafka_fail "$name (pid $pid) exited during startup"
    [ "$(now)" -lt "$deadline" ] || kafka_fail "$name wrote no metadata snapshot within ${KAFKA_START_TIMEOUT}s"
    sleep 0.5
  done
  log "$name took its first metadata snapshot; restarting it with the default snapshot interval"
  kafka_stop_node TERM
  kafka_launch
  kafka_wait_started
}

# One node: start it (or find it running) and wait until it answers.
kafka_start() {
  kafka_node 1
  kafka_launch
  case "$KAFKA_LAUNCHED" in
    foreign)
      log "a Kafka broker not started by this script already answers on $KAFKA_HOST:$KAFKA_PORT; reusing it"
      return 0 ;;
    running)
      local pid; pid="$(kafka_pid)"
      if ! port_open "$KAFKA_HOST" "$KAFKA_PORT"; then
        log "Kafka process $pid exists but does not listen yet; waiting"
        kafka_write_config
        local deadline=$(( $(now) + KAFKA_START_TIMEOUT ))
        kafka_await Kafka "$pid" "$deadline" "Kafka (pid $pid) does not answer on $KAFKA_HOST:$KAFKA_PORT" kafka_answers
      fi
      log "Kafka already running (pid $pid) on $KAFKA_HOST:$KAFKA_PORT"
      kafka_has_snapshot || log "WARNING: this Kafka has no metadata snapshot (started by an infra.sh before the first-start snapshot): after a SCRAM user's removal a restart may refuse every login (see kafka_has_snapshot); to be safe: $0 down; rm -rf $KAFKA_DATA"
      return 0 ;;
  esac
  kafka_wait_started
  kafka_first_snapshot
  local pid="$KAFKA_LAUNCHED" deadline=$(( $(now) + KAFKA_START_TIMEOUT ))
  kafka_await Kafka "$pid" "$deadline" "Kafka does not answer requests within ${KAFKA_START_TIMEOUT}s" kafka_answers
  log "Kafka ready (pid $pid), log: $KAFKA_LOG"
}

# Waits until the brokers with the given ids all answer requests.
kafka_wait_live() {
  local want=("$@") deadline=$(( $(now) + KAFKA_START_TIMEOUT )) live id missing
  while :; do
    live="$(kafka_live_ids)"
    missing=()
    for id in "${want[@]}"; do
      grep -qx "$id" <<<"$live" || missing+=("$id")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(now)" -lt "$deadline" ] \
      || die "Kafka node(s) ${missing[*]} do not answer requests within ${KAFKA_START_TIMEOUT}s (see $LOG_DIR/kafka-c$KAFKA_BROKERS_COUNT-node*.log)"
    sleep 1
  done
}

# A cluster: launch every node that does not run (a quorum needs a majority
# up before any of them finishes starting), then wait for each, then until
# every broker answers.
kafka_cluster_start() {
  local i t0 pids=() launched=() offsets=() inodes=() ids=() needs=()
  t0="$(now)"
  kafka_fetch
  for ((i = 1; i <= KAFKA_BROKERS_COUNT; i++)); do
    kafka_node "$i"
    kafka_launch
    [ "$KAFKA_LAUNCHED" = foreign ] && die "port $KAFKA_HOST:$KAFKA_NODE_PORT: a broker not started by this script answers there"
    launched[i]="$KAFKA_LAUNCHED"
    needs[i]="${KAFKA_NEEDS_SNAPSHOT:-0}"
    offsets[i]="${KAFKA_LOG_OFFSET:-0}"
    inodes[i]="${KAFKA_LOG_INODE:-}"
  done
  for ((i = 1; i <= KAFKA_BROKERS_COUNT; i++)); do
    kafka_node "$i"
    KAFKA_LAUNCHED="${launched[i]}"
    KAFKA_LOG_OFFSET="${offsets[i]}"
    KAFKA_LOG_INODE="${inodes[i]}"
    kafka_wait_started
    ids+=("$i")
  done
  kafka_wait_live "${ids[@]}"
  for ((i = 1; i <= KAFKA_BROKERS_COUNT; i++)); do
    kafka_node "$i"
    KAFKA_NEEDS_SNAPSHOT="${needs[i]}"
    kafka_first_snapshot
    pids+=("$(kafka_pid)")
  done
  [[ " ${needs[*]} " == *" 1 "* ]] && kafka_wait_live "${ids[@]}"
  log "Kafka cluster ready: $KAFKA_BROKERS_COUNT nodes on $(kafka_bootstrap) (pids ${pids[*]}) in $(( $(now) - t0 ))s, replication factor $(kafka_default_rf), min.insync.replicas $(kafka_default_min_isr), logs: $LOG_DIR/kafka-c$KAFKA_BROKERS_COUNT-node*.log"
}

kafka_start_all() {
  kafka_check_layout
  if [ "$KAFKA_BROKERS_COUNT" -eq 1 ]; then kafka_start; else kafka_cluster_start; fi
  kafka_acls
}

# Applies the services' ACLs (internal/kafkaacl) as admin. Creating an ACL
# that exists changes nothing, so every start does it.
kafka_acls() {
  local out
  log "applying the services' Kafka ACLs (choreoctl kafka-acls)"
  if ! out="$(cd "$SCRIPT_DIR/.." && KAFKA_BROKERS="$(kafka_bootstrap)" KAFKA_USERNAME=admin \
      KAFKA_PASSWORD_FILE="$KAFKA_USERS_DIR/admin.password" go run ./cmd/choreoctl kafka-acls 2>&1)"; then
    printf '%s\n' "$out" >&2
    die "applying the Kafka ACLs failed"
  fi
}

# kafka-start-node I: start one node of the cluster again.
kafka_start_node() {
  kafka_node "$1"
  kafka_launch
  [ "$KAFKA_LAUNCHED" = foreign ] && die "port $KAFKA_HOST:$KAFKA_NODE_PORT: a broker not started by this script answers there"
  local was="$KAFKA_LAUNCHED"
  kafka_wait_started
  kafka_first_snapshot
  if [ "$KAFKA_BROKERS_COUNT" -eq 1 ]; then
    until kafka_answers; do
      kafka_pid >/dev/null || kafka_fail "Kafka exited during startup"
      sleep 1
    done
  else
    kafka_wait_live "$1"
  fi
  if [ "$was" = running ]; then
    log "$(kafka_name) already running (pid $(kafka_pid)) on $KAFKA_HOST:$KAFKA_NODE_PORT"
  else
    log "$(kafka_name) ready (pid $(kafka_pid)) on $KAFKA_HOST:$KAFKA_NODE_PORT, log: $KAFKA_LOG"
  fi
}

# Stops the selected node: SIGTERM (SIGKILL after 90s), or SIGKILL at once
# when $1 is "kill"; then waits until its port is closed.
kafka_stop_node() {
  local pid name signal="${1:-TERM}"
  name="$(kafka_name)"
  if ! pid="$(kafka_pid)"; then
    rm -f "$KAFKA_PID_FILE"
    if [ "$KAFKA_BROKERS_COUNT" -eq 1 ]; then
      log "Kafka is not running (from $INFRA_DIR)"
    else
      log "$name is not running (from $INFRA_DIR)"
    fi
    return 0
  fi
  if [ "$signal" = KILL ]; then
    log "killing $name (pid $pid) with SIGKILL"
  else
    log "stopping $name (pid $pid)"
  fi
  kill "-$signal" "$pid" 2>/dev/null || true
  kafka_wait_exit "$pid"
  rm -f "$KAFKA_PID_FILE"
  kafka_wait_port_closed
  log "$name stopped"
}

# Waits until every pid given has exited, and sends SIGKILL to one still
# running 90s after the call: a broker stuck in its shutdown must not hang
# down.
kafka_wait_exit() {
  local pid deadline=$(( $(now) + 90 ))
  for pid in "$@"; do
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$(now)" -ge "$deadline" ]; then
        log "Kafka (pid $pid) did not stop within 90s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 1
        break
      fi
      sleep 0.3
    done
  done
}

# Waits, up to 30s, until the selected node's port is closed, so that a
# start right after finds it free.
kafka_wait_port_closed() {
  local deadline=$(( $(now) + 30 ))
  while port_open "$KAFKA_HOST" "$KAFKA_NODE_PORT" && [ "$(now)" -lt "$deadline" ]; do sleep 0.3; done
}

kafka_stop() {
  kafka_check_layout
  if [ "$KAFKA_BROKERS_COUNT" -eq 1 ]; then
    kafka_node 1
    kafka_stop_node
  else
    kafka_cluster_stop
  fi
  kafka_stop_strays
}

# A cluster: SIGTERM to every node at once (stopped one by one, the last
# ones would wait for a quorum that is gone), SIGKILL after 90s.
kafka_cluster_stop() {
  local i pid pids=()
  for ((i = 1; i <= KAFKA_BROKERS_COUNT; i++)); do
    kafka_node "$i"
    if pid="$(kafka_pid)"; then pids+=("$pid"); else rm -f "$KAFKA_PID_FILE"; fi
  done
  if [ ${#pids[@]} -eq 0 ]; then
    log "Kafka cluster of $KAFKA_BROKERS_COUNT is not running (from $INFRA_DIR)"
    return 0
  fi
  log "stopping Kafka nodes (pids ${pids[*]})"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  kafka_wait_exit "${pids[@]}"
  for ((i = 1; i <= KAFKA_BROKERS_COUNT; i++)); do
    kafka_node "$i"
    rm -f "$KAFKA_PID_FILE"
    kafka_wait_port_closed
  done
  log "Kafka cluster stopped"
}

# Nodes of another layout (a cluster of another size, or the single node)
# that this state dir still runs: stopped too, all at once, so down leaves
# nothing behind.
kafka_stop_strays() {
  local f pid pids=()
  for f in "$RUN_DIR"/kafka.pid "$RUN_DIR"/kafka-c*-node*.pid; do
    [ -f "$f" ] || continue
    pid="$(cat "$f" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
       tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $INFRA_DIR/"; then
      pids+=("$pid")
    fi
    rm -f "$f"
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  log "stopping Kafka of another layout (pids ${pids[*]})"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  kafka_wait_exit "${pids[@]}"
  log "Kafka of another layout stopped"
}

# ---------------------------------------------------------- kafka connect ---

# Fetches the worker's jars and Debezium's PostgreSQL plugin (scripts/connect/
# pom.xml) once. The plugin loses the jars the worker provides anyway (Connect
# loads org.apache.kafka.* and slf4j from the worker, and kafka-clients brings
# its compression libraries); its own Jackson stays, the plugin's class loader
# prefers it.
connect_fetch() {
  # A worker fetched before the REST extension was in the POM fetches again.
  [ -f "$CONNECT_LIBS/connect-basic-auth-extension-$KAFKA_VERSION.jar" ] || rm -f "$CONNECT_LIBS/.complete"
  [ -f "$CONNECT_LIBS/.complete" ] && [ -f "$CONNECT_PLUGIN/.complete" ] && return 0
  ensure_java_maven
  log "downloading Kafka Connect $KAFKA_VERSION and Debezium $DEBEZIUM_VERSION from Maven Central into $CONNECT_HOME"
  mkdir -p "$CONNECT_HOME"
  cp "$SCRIPT_DIR/connect/pom.xml" "$CONNECT_HOME/pom.xml"
  local profile dir
  for profile in worker debezium; do
    if [ "$profile" = worker ]; then dir="$CONNECT_LIBS"; else dir="$CONNECT_PLUGIN"; fi
    [ -f "$dir/.complete" ] && continue
    rm -rf "$dir.tmp"
    local mvn_args=(-q -B -Dstyle.color=never -f "$CONNECT_HOME/pom.xml" -P "$profile"
      "-Dkafka.version=$KAFKA_VERSION" "-Ddebezium.version=$DEBEZIUM_VERSION"
      dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$dir.tmp")
    [ -n "${CHOREO_MVN_REPO:-}" ] && mvn_args+=("-Dmaven.repo.local=$CHOREO_MVN_REPO")
    mvn "${mvn_args[@]}" >"$LOG_DIR/connect-fetch.log" 2>&1 \
      || { tail -n 40 "$LOG_DIR/connect-fetch.log" >&2; die "mvn could not fetch the $profile jars"; }
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
  done
  [ -f "$CONNECT_LIBS/connect-runtime-$KAFKA_VERSION.jar" ] || die "connect-runtime-$KAFKA_VERSION.jar missing after mvn"
  [ -f "$CONNECT_LIBS/connect-basic-auth-extension-$KAFKA_VERSION.jar" ] || die "connect-basic-auth-extension-$KAFKA_VERSION.jar missing after mvn"
  [ -f "$CONNECT_PLUGIN/debezium-connector-postgres-$DEBEZIUM_VERSION.jar" ] || die "debezium-connector-postgres missing after mvn"
  local jar artifact
  for jar in "$CONNECT_PLUGIN"/*.jar; do
    artifact="$(basename "$jar" | sed -E 's/-[0-9][^-]*(-[A-Za-z0-9.]+)?\.jar$//')"
    case "$artifact" in jackson-*) continue ;; esac
    compgen -G "$CONNECT_LIBS/$artifact-[0-9]*.jar" >/dev/null && rm -f "$jar"
  done
  touch "$CONNECT_LIBS/.complete" "$CONNECT_PLUGIN/.complete"
  log "Connect jars: $(find "$CONNECT_LIBS" -name '*.jar' | wc -l) files, $(du -sh "$CONNECT_LIBS" | cut -f1); Debezium plugin: $(find "$CONNECT_PLUGIN" -name '*.jar' | wc -l) files, $(du -sh "$CONNECT_PLUGIN" | cut -f1)"
}

# The worker's configuration. Its connectors' producers keep what the
# built-in relay relies on: acks=all, idempotence, and at most 5 requests in
# flight so idempotence keeps each partition's order. A connector may
# override only its login (connector.client.config.override.policy=
# Principal: sasl.jaas.config, sasl.mechanism, security.protocol): each
# produces as its service's Kafka user (internal/connect), and the worker's
# own user, connect, writes only the worker's topics. Connector
# configurations name their passwords as ${file:...} in CONNECT_SECRETS_DIR
# (FileConfigProvider, limited to that directory), so the REST API and the
# config topic never show them. The REST API asks for a password
# (BasicAuthSecurityRestExtension, the JAAS file below); it listens on
# 127.0.0.1 only. Offsets are flushed every second: Debezium confirms a WAL
# position to its slot only once the worker has committed the offsets up
# to it.
connect_write_config() {
  mkdir -p "$CONNECT_CONF"
  kafka_passwords
  connect_rest_password
  (umask 077 && mkdir -p "$CONNECT_SECRETS_DIR")
  chmod 700 "$CONNECT_SECRETS_DIR"
  local rf jaas
  rf="$(kafka_default_rf)"
  jaas="org.apache.kafka.common.security.scram.ScramLoginModule required username=\"connect\" password=\"$(kafka_password connect)\";"
  (umask 077 && cat >"$CONNECT_CONF/worker.properties") <<EOF
# generated by scripts/infra.sh -- rewritten on every start
bootstrap.servers=$(kafka_bootstrap)
group.id=choreo-connect
config.storage.topic=choreo-connect-configs
offset.storage.topic=choreo-connect-offsets
status.storage.topic=choreo-connect-status
config.storage.replication.factor=$rf
offset.storage.replication.factor=$rf
status.storage.replication.factor=$rf
offset.flush.interval.ms=1000
key.converter=org.apache.kafka.connect.converters.ByteArrayConverter
value.converter=org.apache.kafka.connect.converters.ByteArrayConverter
listeners=http://$KAFKA_HOST:$CONNECT_PORT
rest.advertised.host.name=$KAFKA_HOST
rest.advertised.port=$CONNECT_PORT
plugin.path=$CONNECT_PLUGINS
# Every plugin here has ServiceLoader manifests (the worker says so): no
# reflection scan, 37-62 s of every start on 2 cores.
plugin.discovery=service_load
connector.client.config.override.policy=Principal
config.providers=file
config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
config.providers.file.param.allowed.paths=$CONNECT_SECRETS_DIR
rest.extension.classes=org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=$jaas
producer.security.protocol=SASL_PLAINTEXT
producer.sasl.mechanism=SCRAM-SHA-512
producer.sasl.jaas.config=$jaas
producer.acks=all
producer.enable.idempotence=true
producer.max.in.flight.requests.per.connection=5
consumer.security.protocol=SASL_PLAINTEXT
consumer.sasl.mechanism=SCRAM-SHA-512
consumer.sasl.jaas.config=$jaas
admin.security.protocol=SASL_PLAINTEXT
admin.sasl.mechanism=SCRAM-SHA-512
admin.sasl.jaas.config=$jaas
EOF
  (umask 077 && cat >"$CONNECT_CONF/rest-jaas.conf") <<EOF
KafkaConnect {
  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required
  file="$CONNECT_REST_DIR/users.properties";
};
EOF
  cat >"$CONNECT_CONF/log4j2.properties" <<EOF
# worker logging: INFO (clients at WARN) into $CONNECT_LOG
status = warn
name = choreo-connect
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = $CONNECT_LOG
appender.file.filePattern = $CONNECT_LOG.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
EOF
}

# Creates the REST user's password once (CONNECT_REST_DIR, 0700, files
# 0600) and, from it, the users file the worker's PropertyFileLoginModule
# reads ("user: password").
connect_rest_password() {
  (umask 077 && mkdir -p "$CONNECT_REST_DIR")
  local file="$CONNECT_REST_DIR/$CONNECT_REST_USER.password"
  [ -s "$file" ] || (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$file")
  (umask 077 && printf '%s: %s\n' "$CONNECT_REST_USER" "$(cat "$file")" >"$CONNECT_REST_DIR/users.properties")
}

connect_pid() {
  local pid
  [ -f "$CONNECT_PID_FILE" ] || return 1
  pid="$(cat "$CONNECT_PID_FILE" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "ConnectDistributed $CONNECT_CONF/worker.properties" || return 1
  echo "$pid"
}

# curl reads the credential from its config on stdin, not its arguments,
# which any local user could read in ps.
connect_answers() {
  printf 'user = "%s:%s"\n' "$CONNECT_REST_USER" "$(cat "$CONNECT_REST_DIR/$CONNECT_REST_USER.password")" \
    | curl -fsS -m 2 -K - "http://$KAFKA_HOST:$CONNECT_PORT/connectors" >/dev/null 2>&1
}

# connect-up: Kafka and PostgreSQL must run (infra.sh up). The connect
# user's SCRAM credential is set on every start, so a state dir formatted
# before the user existed gets it too.
connect_up() {
  local pid t0
  t0="$(now)"
  if pid="$(connect_pid)"; then
    log "Kafka Connect already running (pid $pid) on $KAFKA_HOST:$CONNECT_PORT"
    return 0
  fi
  port_open "$KAFKA_HOST" "$CONNECT_PORT" && die "port $KAFKA_HOST:$CONNECT_PORT is taken (set CONNECT_PORT)"
  pg_find_bin || die "PostgreSQL is not installed: run '$0 up' first"
  [ "$(pg_psql -d postgres -Atc 'show wal_level' 2>/dev/null)" = logical ] \
    || die "PostgreSQL on $PG_HOST:$PG_PORT does not run with wal_level=logical (started by an older infra.sh?): run '$0 pg-restart'"
  kafka_fetch
  kafka_node 1
  kafka_write_config
  kafka_answers || die "Kafka does not answer on $(kafka_bootstrap): run '$0 up' first"
  KAFKA_TOOL_TIMEOUT=120 kafka_tool kafka.admin.ConfigCommand --bootstrap-server "$(kafka_bootstrap)" \
      --command-config "$KAFKA_CONF/admin.properties" --alter --entity-type users --entity-name connect \
      --add-config "SCRAM-SHA-512=[iterations=8192,password=$(kafka_password connect)]" >"$LOG_DIR/connect-user.log" 2>&1 \
    || { tail -n 20 "$LOG_DIR/connect-user.log" >&2; die "setting the connect user's SCRAM credential failed"; }
  kafka_acls
  connect_fetch
  connect_write_config
  rm -f "$CONNECT_PID_FILE"
  log "starting Kafka Connect $KAFKA_VERSION (distributed, Debezium $DEBEZIUM_VERSION) on $KAFKA_HOST:$CONNECT_PORT"
  printf '\n==== %s starting Kafka Connect %s ====\n' "$(date -Is)" "$KAFKA_VERSION" >>"$CONNECT_OUT"
  # shellcheck disable=SC2016  # $$ is the child's
  (cd "$CONNECT_HOME" && exec setsid nohup bash -c 'echo $$ >"$0"; exec "$@"' "$CONNECT_PID_FILE" \
    java -Xms128m -Xmx256m -XX:+UseG1GC -Djava.awt.headless=true \
      "-Dlog4j2.configurationFile=$CONNECT_CONF/log4j2.properties" \
      "-Djava.security.auth.login.config=$CONNECT_CONF/rest-jaas.conf" ${CONNECT_JVM_OPTS:-} \
      -cp "$CONNECT_LIBS/*" org.apache.kafka.connect.cli.ConnectDistributed "$CONNECT_CONF/worker.properties") \
    </dev/null >>"$CONNECT_OUT" 2>&1 3>&- 8>&- &
  local deadline=$(( $(now) + CONNECT_START_TIMEOUT ))
  pid=""
  until connect_answers; do
    [ -n "$pid" ] || pid="$(connect_pid || true)"
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then connect_fail "Kafka Connect (pid $pid) exited"; fi
    [ "$(now)" -lt "$deadline" ] || connect_fail "Kafka Connect does not answer on $KAFKA_HOST:$CONNECT_PORT within ${CONNECT_START_TIMEOUT}s"
    sleep 0.5
  done
  log "Kafka Connect ready (pid $(connect_pid)) in $(( $(now) - t0 ))s, log: $CONNECT_LOG"
}

connect_fail() {
  log "---- last lines of $CONNECT_LOG ----"
  tail -n 40 "$CONNECT_LOG" >&2 2>/dev/null || true
  log "---- last lines of $CONNECT_OUT ----"
  tail -n 20 "$CONNECT_OUT" >&2 2>/dev/null || true
  die "$*"
}

connect_down() {
  local pid
  if ! pid="$(connect_pid)"; then
    rm -f "$CONNECT_PID_FILE"
    log "Kafka Connect is not running (from $INFRA_DIR)"
    return 0
  fi
  log "stopping Kafka Connect (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  kafka_wait_exit "$pid"
  rm -f "$CONNECT_PID_FILE"
  log "Kafka Connect stopped"
}

# connect-register: one Debezium connector per service database (their
# configuration is internal/connect's), through the worker's REST API.
connect_register() {
  local out
  if ! out="$(cd "$SCRIPT_DIR/.." && eval "$(print_env)" && go run ./cmd/choreoctl connect-register 2>&1)"; then
    printf '%s\n' "$out" >&2
    die "registering the Debezium connectors failed"
  fi
  printf '%s\n' "$out" >&2
}

# ------------------------------------------------------------- postgresql ---

PG_BIN=""

pg_find_bin() {
  local d
  PG_BIN=""
  for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V); do
    [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ] && PG_BIN="$d"
  done
  [ -n "$PG_BIN" ]
}

pg_ensure_installed() {
  pg_find_bin && return 0
  apt_install postgresql
  pg_find_bin || die "PostgreSQL binaries still missing after apt-get install postgresql"
  # Debian's postinst may have started its default cluster on 5432: stop it,
  # it has password auth and would shadow ours.
  if command -v pg_lsclusters >/dev/null 2>&1; then
    pg_lsclusters --no-header 2>/dev/null | while read -r ver name _port status _rest; do
      if [ "$status" = online ]; then
        log "stopping Debian's default cluster $ver/$name"
        pg_ctlcluster "$ver" "$name" stop >&2 || true
      fi
    done
  fi
}

# Run a command as the owner of the cluster (postgres when we are root).
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    (cd / && exec runuser -u postgres -- "$@")
  else
    "$@"
  fi
}

pg_psql() {
  PGCONNECT_TIMEOUT=5 "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 \
    -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" "$@"
}

# As root, the postgres user must be able to reach the data dir: grant
# search (x) permission on parents that deny it (e.g. /root is 0700).
pg_ensure_reachable() {
  [ "$(id -u)" -eq 0 ] || return 0
  local d="$PG_ROOT" dirs=()
  while [ "$d" != / ] && [ -n "$d" ]; do dirs=("$d" "${dirs[@]}"); d="$(dirname "$d")"; done
  for d in "${dirs[@]}"; do
    [ -d "$d" ] || continue
    if ! runuser -u postgres -- test -x "$d"; then
      log "granting o+x on $d so the postgres user can reach $PG_DATA"
      chmod o+x "$d"
    fi
  done
}

pg_init() {
  mkdir -p "$PG_ROOT" "$PG_SOCK" "$LOG_DIR"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres:postgres "$PG_ROOT" "$PG_SOCK"
    touch "$LOG_DIR/postgres.log" && chown postgres:postgres "$LOG_DIR/postgres.log"
  fi
  pg_ensure_reachable
  local major
  major="$(basename "$(dirname "$PG_BIN")")"
  if [ -f "$PG_DATA/PG_VERSION" ]; then
    [ "$(cat "$PG_DATA/PG_VERSION")" = "$major" ] \
      || die "$PG_DATA holds a PostgreSQL $(cat "$PG_DATA/PG_VERSION") cluster but the binaries are $major; remove it or set CHOREO_INFRA_DIR"
  else
    log "initdb: new PostgreSQL $major cluster in $PG_DATA"
    rm -rf "$PG_DATA"
    as_pg mkdir -m 700 "$PG_DATA"
    as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U "$PG_USER" --auth=trust --encoding=UTF8 --no-locale \
      >>"$LOG_DIR/postgres-initdb.log" 2>&1 \
      || { tail -n 30 "$LOG_DIR/postgres-initdb.log" >&2; die "initdb failed"; }
    echo "include_if_exists = 'choreo.conf'" | as_pg tee -a "$PG_DATA/postgresql.conf" >/dev/null
  fi
  # unix socket path must stay under ~107 bytes
  local sockdir="$PG_SOCK"
  [ "${#sockdir}" -le 80 ] || sockdir=/tmp
  as_pg tee "$PG_DATA/choreo.conf" >/dev/null <<EOF
# generated by scripts/infra.sh -- rewritten on every start
listen_addresses = '$PG_HOST'
port = $PG_PORT
unix_socket_directories = '$sockdir'
max_connections = 200
# Debezium (OUTBOX_RELAY=debezium) decodes the WAL: one slot per service
# database, tests' own databases included, with room to spare.
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
# A slot left behind (a connector deleted, a test killed) holds WAL until the
# disk fills. Capped, PostgreSQL invalidates it instead (wal_status 'lost'):
# with the services stopped, choreoctl connect-remove (which marks the rows
# not yet swept for the next hand-over), connect-register, then start them;
# no row is lost, since the service sweeps only what the slot confirmed and
# stops sweeping once it is lost (pkg/outbox/cdc.go).
max_slot_wal_keep_size = 2GB
EOF
}

pg_ours_running() { [ -f "$PG_DATA/PG_VERSION" ] && as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; }

pg_start() {
  pg_ensure_installed
  # a server of ours that is starting up or dying (e.g. after kill -9) gets some time
  local deadline=$(( $(now) + 30 ))
  while pg_ours_running && ! port_open "$PG_HOST" "$PG_PORT"; do
    [ "$(now)" -lt "$deadline" ] \
      || die "our PostgreSQL ($PG_DATA) runs but not on $PG_HOST:$PG_PORT; run '$0 down' first"
    sleep 0.5
  done
  if pg_ours_running; then
    log "PostgreSQL already running ($PG_DATA) on $PG_HOST:$PG_PORT"
  elif port_open "$PG_HOST" "$PG_PORT"; then
    pg_psql -d postgres -Atc 'select 1' >/dev/null 2>&1 \
      || die "port $PG_HOST:$PG_PORT is taken by a server that does not let user $PG_USER in without a password (set PGPORT to use another port)"
    log "a PostgreSQL not started by this script already runs on $PG_HOST:$PG_PORT; reusing it"
  else
    pg_init
    log "starting PostgreSQL $(basename "$(dirname "$PG_BIN")") on $PG_HOST:$PG_PORT"
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$LOG_DIR/postgres.log" -w -t 90 start \
        </dev/null >&2 3>&- 8>&- \
      || { tail -n 30 "$LOG_DIR/postgres.log" >&2; die "PostgreSQL did not start"; }
  fi
  # An open port is not a server taking queries: one that is still starting
  # or recovering (after kill -9) refuses sessions for a while, and the
  # database check below would then read "missing" and fail to create it.
  local ready_by=$(( $(now) + 90 ))
  until pg_psql -d postgres -Atc 'select 1' >/dev/null 2>&1; do
    [ "$(now)" -lt "$ready_by" ] \
      || { tail -n 30 "$LOG_DIR/postgres.log" >&2; die "PostgreSQL on $PG_HOST:$PG_PORT takes no queries after 90 s"; }
    sleep 0.2
  done
  local db
  for db in "${DATABASES[@]}"; do
    if [ "$(pg_psql -d postgres -Atc "select 1 from pg_database where datname = '$db'")" != 1 ]; then
      log "creating database $db"
      pg_psql -d postgres -c "create database \"$db\"" >&2
    fi
  done
  log "PostgreSQL ready, databases: ${DATABASES[*]}"
}

pg_stop() {
  if ! pg_find_bin || ! pg_ours_running; then
    log "PostgreSQL is not running (from $PG_DATA)"
    return 0
  fi
  log "stopping PostgreSQL ($PG_DATA)"
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 90 stop </dev/null >&2 3>&- 8>&-
}

# --------------------------------------------------------------- commands ---

cmd_status() {
  local pid rc=0 i label=kafka:
  kafka_check_layout
  for ((i = 1; i <= KAFKA_BROKERS_COUNT; i++)); do
    kafka_node "$i"
    [ "$KAFKA_BROKERS_COUNT" -eq 1 ] || label="kafka-$i:"
    if pid="$(kafka_pid)"; then
      if [ "$KAFKA_BROKERS_COUNT" -eq 1 ]; then
        echo "kafka:      running, pid $pid, $KAFKA_HOST:$KAFKA_PORT (Kafka $KAFKA_VERSION, data $KAFKA_DATA)"
      else
        printf '%-11s running, pid %s, %s:%s (controller :%s, Kafka %s, data %s)\n' "$label" "$pid" \
          "$KAFKA_HOST" "$KAFKA_NODE_PORT" "$KAFKA_NODE_CONTROLLER_PORT" "$KAFKA_VERSION" "$KAFKA_DATA"
      fi
    elif port_open "$KAFKA_HOST" "$KAFKA_NODE_PORT"; then
      printf '%-11s not ours, but something listens on %s:%s\n' "$label" "$KAFKA_HOST" "$KAFKA_NODE_PORT"
    else
      printf '%-11s stopped\n' "$label"; rc=1
    fi
  done
  if pg_find_bin && pg_ours_running; then
    echo "postgresql: running, pid $(head -n1 "$PG_DATA/postmaster.pid"), $PG_HOST:$PG_PORT (data $PG_DATA)"
  elif port_open "$PG_HOST" "$PG_PORT"; then
    echo "postgresql: not ours, but something listens on $PG_HOST:$PG_PORT"
  else
    echo "postgresql: stopped"; rc=1
  fi
  if pid="$(connect_pid)"; then
    echo "connect:    running, pid $pid, http://$KAFKA_HOST:$CONNECT_PORT (Kafka Connect $KAFKA_VERSION, Debezium $DEBEZIUM_VERSION)"
  else
    echo "connect:    stopped (optional: connect-up)"
  fi
  return "$rc"
}

main() {
  local cmd="${1:-up}"
  case "$cmd" in
    up)
      exec 3>&1 1>&2          # stdout is only for the export lines
      take_lock
      local t0; t0="$(now)"
      pg_start
      kafka_start_all
      log "infrastructure up in $(( $(now) - t0 ))s (state in $INFRA_DIR)"
      print_env >&3
      ;;
    env) print_env ;;
    down) take_lock; connect_down; kafka_stop; pg_stop ;;
    connect-up) exec 3>&1 1>&2; take_lock; connect_up ;;
    connect-down) take_lock; connect_down ;;
    connect-register) exec 3>&1 1>&2; connect_register ;;
    kafka-start) exec 3>&1 1>&2; take_lock; kafka_start_all ;;
    kafka-stop) take_lock; kafka_stop ;;
    kafka-start-node) exec 3>&1 1>&2; kafka_check_layout; kafka_check_node "${2:-}"; take_lock; kafka_start_node "$2" ;;
    kafka-stop-node) kafka_check_layout; kafka_check_node "${2:-}"; take_lock; kafka_node "$2"; kafka_stop_node TERM ;;
    kafka-kill-node) kafka_check_layout; kafka_check_node "${2:-}"; take_lock; kafka_node "$2"; kafka_stop_node KILL ;;
    pg-stop) take_lock; pg_stop ;;
    pg-start) exec 3>&1 1>&2; take_lock; pg_start ;;
    pg-restart)
      exec 3>&1 1>&2
      take_lock
      local t0; t0="$(now)"
      pg_stop
      pg_start
      log "PostgreSQL restarted in $(( $(now) - t0 ))s"
      ;;
    status) cmd_status ;;
    -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
    *) die "unknown command '$cmd' (up|env|down|status|kafka-start|kafka-stop|kafka-start-node I|kafka-stop-node I|kafka-kill-node I|pg-stop|pg-start|pg-restart|connect-up|connect-down|connect-register)" ;;
  esac
}

main "$@"
