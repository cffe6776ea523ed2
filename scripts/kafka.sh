#!/usr/bin/env bash
# scripts/kafka.sh {install|start|stop|status}
#
# A real Apache Kafka 4.x broker for tests: KRaft combined mode (broker + controller), single node,
# bound to 127.0.0.1 only, run straight from the Maven Central jars (no tarball, no Docker).
#
#   install  fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION and a Log4j 2 SLF4J backend into
#            ${CHATTER_CACHE_DIR:-~/.cache/airflow-chatter}/kafka-<version>/lib (idempotent).
#   start    format a fresh throw-away log dir and start the broker on 127.0.0.1:$KAFKA_PORT
#            (controller on $KAFKA_PORT+1); wait until a kafka-python producer gets a message
#            acknowledged; print the bootstrap address. With KAFKA_BOOTSTRAP_SERVERS set, print it
#            and do nothing.
#   stop     SIGTERM the broker named by its own pid file (SIGKILL after $KAFKA_STOP_TIMEOUT s).
#            KAFKA_KEEP_DATA=1 keeps the log dir on stop and reuses it on the next start (a broker
#            restart with its topics; the fault suite's outage), instead of a fresh one.
#   status   exit 0 and print the address when this port's broker runs, exit 3 otherwise.
#
# Environment: KAFKA_PORT (19092), KAFKA_VERSION (4.1.0), KAFKA_LOG4J_VERSION (2.25.3),
# CHATTER_CACHE_DIR, CHATTER_STATE_DIR (<checkout>/.cache/services), KAFKA_START_TIMEOUT (90),
# KAFKA_STOP_TIMEOUT (20), KAFKA_HEAP_OPTS, KAFKA_JVM_OPTS, KAFKA_NUM_PARTITIONS (3),
# CHATTER_PYTHON (the interpreter with kafka-python used for the readiness probe).
# KAFKA_SASL_PORT (unset: none) adds a SASL_PLAINTEXT listener with the PLAIN mechanism on
# 127.0.0.1:$KAFKA_SASL_PORT beside the PLAINTEXT one (KRaft, JAAS config inline in server.properties),
# for the user KAFKA_SASL_USERNAME (chatter) with the password KAFKA_SASL_PASSWORD (chatter-secret).
# KAFKA_SASL_LIMITED_USER=<name>:<password> (with KAFKA_SASL_PORT) adds a second PLAIN user that may do only what
# ACLs grant it: the broker then runs KRaft's StandardAuthorizer, with the SASL user and User:ANONYMOUS (the
# PLAINTEXT and controller listeners: the broker itself, the readiness probe) as super users.
#
# Processes are only ever signalled by the pid in this port's pid file, after checking that the
# pid still is this port's broker. Nothing is killed by name.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

KAFKA_VERSION="${KAFKA_VERSION:-4.1.0}"
LOG4J_VERSION="${KAFKA_LOG4J_VERSION:-2.25.3}"
SLF4J_VERSION="2.0.17"
DEP_PLUGIN_VERSION="3.8.1"
CACHE_ROOT="${CHATTER_CACHE_DIR:-$HOME/.cache/airflow-chatter}"
KAFKA_HOME_DIR="$CACHE_ROOT/kafka-$KAFKA_VERSION"
LIB_DIR="$KAFKA_HOME_DIR/lib"
STAMP="$LIB_DIR/.chatter-complete"

PORT="${KAFKA_PORT:-19092}"
case "$PORT" in '' | *[!0-9]*) echo "kafka.sh: KAFKA_PORT must be a number, got '$PORT'" >&2; exit 2 ;; esac
CONTROLLER_PORT=$((PORT + 1))
SASL_PORT="${KAFKA_SASL_PORT:-}"
case "$SASL_PORT" in *[!0-9]*) echo "kafka.sh: KAFKA_SASL_PORT must be a number, got '$SASL_PORT'" >&2; exit 2 ;; esac
SASL_USERNAME="${KAFKA_SASL_USERNAME:-chatter}"
SASL_PASSWORD="${KAFKA_SASL_PASSWORD:-chatter-secret}"
case "$SASL_USERNAME$SASL_PASSWORD" in *[\"\\\;\ ]*) echo "kafka.sh: KAFKA_SASL_USERNAME/PASSWORD must not contain quotes, backslashes, spaces or ';'" >&2; exit 2 ;; esac
LIMITED_USER="${KAFKA_SASL_LIMITED_USER:-}"
if [ -n "$LIMITED_USER" ]; then
  [ -n "$SASL_PORT" ] || { echo "kafka.sh: KAFKA_SASL_LIMITED_USER needs KAFKA_SASL_PORT" >&2; exit 2; }
  case "$LIMITED_USER" in ?*:?*) ;; *) echo "kafka.sh: KAFKA_SASL_LIMITED_USER must be <name>:<password>" >&2; exit 2 ;; esac
  case "$LIMITED_USER" in *[\"\\\;\ ]*) echo "kafka.sh: KAFKA_SASL_LIMITED_USER must not contain quotes, backslashes, spaces or ';'" >&2; exit 2 ;; esac
fi
STATE_ROOT="${CHATTER_STATE_DIR:-$here/.cache/services}"
STATE_DIR="$STATE_ROOT/kafka-$PORT"
PID_FILE="$STATE_DIR/kafka.pid"
LOG_FILE="$STATE_DIR/kafka.log"
CONFIG_FILE="$STATE_DIR/server.properties"
LOG4J_FILE="$STATE_DIR/log4j2.properties"
DATA_DIR="$STATE_DIR/data"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-20}"
HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx768m}"
JVM_OPTS="${KAFKA_JVM_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:MaxDirectMemorySize=256m -Djava.awt.headless=true}"
ADDRESS="127.0.0.1:$PORT"

log() { echo "kafka.sh: $*" >&2; }
die() { log "$*"; exit 1; }

python_bin() {
  if [ -n "${CHATTER_PYTHON:-}" ]; then echo "$CHATTER_PYTHON"; return; fi
  if [ -x "$here/.venv/bin/python" ]; then echo "$here/.venv/bin/python"; return; fi
  echo python3
}

# ------------------------------------------------------------------------------------------------
# install
# ------------------------------------------------------------------------------------------------

installed() { [ -f "$STAMP" ] && [ -f "$LIB_DIR/kafka_2.13-$KAFKA_VERSION.jar" ]; }

cmd_install() {
  if installed; then
    log "Kafka $KAFKA_VERSION already installed in $LIB_DIR"
    return 0
  fi
  command -v java >/dev/null 2>&1 || die "java (17+) not found on PATH"
  command -v mvn >/dev/null 2>&1 || die "mvn not found on PATH"
  mkdir -p "$CACHE_ROOT"
  # Two engineers (or two test sessions) may install at once: serialise on a lock in the cache.
  exec 9>"$CACHE_ROOT/.kafka-$KAFKA_VERSION.lock"
  flock -w 900 9 || die "could not lock $CACHE_ROOT/.kafka-$KAFKA_VERSION.lock within 900 s"
  if installed; then
    log "Kafka $KAFKA_VERSION already installed in $LIB_DIR"
    return 0
  fi
  local work
  work="$(mktemp -d "$CACHE_ROOT/.kafka-$KAFKA_VERSION.install.XXXXXX")"
  cat >"$work/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 https://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.airflow-chatter</groupId>
  <artifactId>kafka-test-broker</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <!-- Kafka's POM brings slf4j-api 1.7.x, which cannot see an SLF4J 2 provider; the 2.x API is
         backwards compatible with 1.7 callers, so pin it next to the Log4j 2 backend. -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-api</artifactId>
      <version>$SLF4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j2-impl</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-api</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>$DEP_PLUGIN_VERSION</version>
      </plugin>
    </plugins>
  </build>
</project>
POM
  log "fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION and log4j $LOG4J_VERSION from Maven Central"
  if ! mvn -q -B -f "$work/pom.xml" \
      "org.apache.maven.plugins:maven-dependency-plugin:$DEP_PLUGIN_VERSION:copy-dependencies" \
      -DoutputDirectory="$work/lib" -DincludeScope=runtime >"$work/mvn.log" 2>&1; then
    tail -n 40 "$work/mvn.log" >&2 || true
    rm -rf "$work"
    die "maven could not fetch Kafka $KAFKA_VERSION (see the output above)"
  fi
  [ -f "$work/lib/kafka_2.13-$KAFKA_VERSION.jar" ] || { rm -rf "$work"; die "kafka_2.13-$KAFKA_VERSION.jar missing after fetch"; }
  [ -f "$work/lib/log4j-slf4j2-impl-$LOG4J_VERSION.jar" ] || { rm -rf "$work"; die "log4j-slf4j2-impl missing after fetch"; }
  [ -f "$work/lib/slf4j-api-$SLF4J_VERSION.jar" ] || { rm -rf "$work"; die "slf4j-api $SLF4J_VERSION missing after fetch"; }
  date -u +%FT%TZ >"$work/lib/.chatter-complete"
  mkdir -p "$KAFKA_HOME_DIR"
  rm -rf "$LIB_DIR"
  mv "$work/lib" "$LIB_DIR"
  cp "$work/pom.xml" "$KAFKA_HOME_DIR/pom.xml"
  rm -rf "$work"
  exec 9>&-
  log "installed Kafka $KAFKA_VERSION ($(find "$LIB_DIR" -name '*.jar' | wc -l) jars) in $LIB_DIR"
}

# ------------------------------------------------------------------------------------------------
# process helpers (by pid file only)
# ------------------------------------------------------------------------------------------------

# True when $1 is a live (non-zombie) process that is this port's broker.
is_our_broker() {
  local pid="$1"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  local state
  state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
  [ "$state" != "Z" ] && [ -n "$state" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$CONFIG_FILE" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "kafka.Kafka" || return 1
}

read_pid() { [ -f "$PID_FILE" ] && tr -dc '0-9' <"$PID_FILE" || true; }

running_pid() {
  local pid
  pid="$(read_pid)"
  if [ -n "$pid" ] && is_our_broker "$pid"; then echo "$pid"; fi
}

port_in_use() {
  # bash's /dev/tcp: a successful connect means something listens there.
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Wait until a kafka-python producer gets one message acknowledged (not just a TCP accept), while
# the broker process stays alive. Bounded by START_TIMEOUT.
wait_ready() {
  local pid="$1" py
  py="$(python_bin)"
  "$py" - "$ADDRESS" "$pid" "$START_TIMEOUT" <<'PY'
import os, sys, time, logging
logging.disable(logging.CRITICAL)
address, pid, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
try:
    from kafka import KafkaProducer
except ImportError as exc:  # pragma: no cover - environment problem
    print(f"readiness probe needs kafka-python: {exc}", file=sys.stderr)
    sys.exit(2)

def alive() -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False

deadline = time.monotonic() + timeout
last = "no attempt"
while time.monotonic() < deadline:
    if not alive():
        print("broker process exited during start-up", file=sys.stderr)
        sys.exit(3)
    producer = None
    try:
        left_ms = max(1000, int((deadline - time.monotonic()) * 1000))
        producer = KafkaProducer(
            bootstrap_servers=address, api_version=None, acks="all",
            bootstrap_timeout_ms=min(3000, left_ms), max_block_ms=min(10000, left_ms),
            request_timeout_ms=5000, delivery_timeout_ms=10000, client_id="chatter-readiness",
        )
        md = producer.send("__chatter_readiness", value=b"ping").get(timeout=min(15, left_ms / 1000))
        if md.offset >= 0:
            print(f"ready: __chatter_readiness[{md.partition}]@{md.offset}", file=sys.stderr)
            sys.exit(0)
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready yet"
        last = f"{type(exc).__name__}: {exc}"
    finally:
        if producer is not None:
            try:
                producer.close(timeout=0)
            except Exception:  # noqa: BLE001
                pass
    time.sleep(0.5)
print(f"broker not ready within {timeout:.0f} s (last error: {last})", file=sys.stderr)
sys.exit(1)
PY
}

# ------------------------------------------------------------------------------------------------
# start / stop / status
# ------------------------------------------------------------------------------------------------

write_config() {
  local partitions="${KAFKA_NUM_PARTITIONS:-3}"
  local listeners="PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT"
  local advertised="PLAINTEXT://127.0.0.1:$PORT"
  local protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
  if [ -n "$SASL_PORT" ]; then
    listeners="$listeners,SASL_PLAINTEXT://127.0.0.1:$SASL_PORT"
    advertised="$advertised,SASL_PLAINTEXT://127.0.0.1:$SASL_PORT"
    protocols="$protocols,SASL_PLAINTEXT:SASL_PLAINTEXT"
  fi
  cat >"$CONFIG_FILE" <<PROPS
# Generated by scripts/kafka.sh for a throw-away single-node test broker. Loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$CONTROLLER_PORT
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$DATA_DIR
num.partitions=$partitions
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
background.threads=2
log.cleaner.threads=1
log.retention.check.interval.ms=3600000
PROPS
  if [ -n "$SASL_PORT" ]; then
    local limited_jaas=""
    [ -z "$LIMITED_USER" ] || limited_jaas=" user_${LIMITED_USER%%:*}=\"${LIMITED_USER#*:}\""
    cat >>"$CONFIG_FILE" <<PROPS
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="$SASL_USERNAME" password="$SASL_PASSWORD" user_$SASL_USERNAME="$SASL_PASSWORD"$limited_jaas;
PROPS
  fi
  if [ -n "$LIMITED_USER" ]; then
    cat >>"$CONFIG_FILE" <<PROPS
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:$SASL_USERNAME
allow.everyone.if.no.acl.found=false
PROPS
  fi
  cat >"$LOG4J_FILE" <<'LOG4J'
status = warn
name = chatter-test-broker
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = WARN
logger.apachekafka.name = org.apache.kafka
logger.apachekafka.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.raftserver.name = kafka.server.KafkaRaftServer
logger.raftserver.level = INFO
LOG4J
}

java_cmd() {
  # JAVA_CMD as an array: the classpath wildcard must reach java unexpanded.
  # shellcheck disable=SC2206 # HEAP_OPTS / JVM_OPTS are deliberately word-split
  JAVA_CMD=(java $HEAP_OPTS $JVM_OPTS "-Dlog4j2.configurationFile=$LOG4J_FILE" -cp "$LIB_DIR/*")
}

cmd_start() {
  if [ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
    log "KAFKA_BOOTSTRAP_SERVERS is set; not starting a local broker"
    echo "$KAFKA_BOOTSTRAP_SERVERS"
    return 0
  fi
  mkdir -p "$STATE_DIR"
  exec 8>"$STATE_DIR/.lock"
  flock -w "$((START_TIMEOUT + 60))" 8 || die "another kafka.sh holds $STATE_DIR/.lock"
  local pid
  pid="$(running_pid)"
  if [ -n "$pid" ]; then
    log "broker already running (pid $pid) on $ADDRESS"
    wait_ready "$pid" || die "broker pid $pid on $ADDRESS is not answering; see $LOG_FILE"
    echo "$ADDRESS"
    return 0
  fi
  rm -f "$PID_FILE"
  if port_in_use "$PORT"; then die "127.0.0.1:$PORT is already in use by another process"; fi
  if port_in_use "$CONTROLLER_PORT"; then die "127.0.0.1:$CONTROLLER_PORT (controller) is already in use by another process"; fi
  if [ -n "$SASL_PORT" ] && port_in_use "$SASL_PORT"; then die "127.0.0.1:$SASL_PORT (SASL) is already in use by another process"; fi
  cmd_install
  command -v java >/dev/null 2>&1 || die "java (17+) not found on PATH"

  if [ "${KAFKA_KEEP_DATA:-0}" = 1 ] && [ -f "$DATA_DIR/meta.properties" ]; then
    write_config
    java_cmd
    : >"$LOG_FILE"
    nohup "${JAVA_CMD[@]}" kafka.Kafka "$CONFIG_FILE" </dev/null >>"$LOG_FILE" 2>&1 8>&- 9>&- &
    pid=$!
    echo "$pid" >"$PID_FILE"
    log "restarted broker pid $pid on $ADDRESS with its kept log dir $DATA_DIR"
    wait_ready "$pid" || die "broker on $ADDRESS did not become ready within ${START_TIMEOUT}s; see $LOG_FILE"
    echo "$ADDRESS"
    return 0
  fi
  rm -rf "$DATA_DIR"
  mkdir -p "$DATA_DIR"
  write_config
  # A random cluster id in Kafka's own format: 16 random bytes, URL-safe base64 without padding
  # (the same as `StorageTool random-uuid`, without paying for a JVM start).
  local cluster_id
  cluster_id="$(python3 -c 'import base64,uuid
while True:
    s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not s.startswith("-"):
        print(s); break')"
  java_cmd
  if ! "${JAVA_CMD[@]}" kafka.tools.StorageTool format --standalone -t "$cluster_id" -c "$CONFIG_FILE" \
      >"$STATE_DIR/format.log" 2>&1; then
    cat "$STATE_DIR/format.log" >&2
    die "formatting $DATA_DIR failed"
  fi
  : >"$LOG_FILE"
  # The broker must not inherit the lock descriptors (8: this port's start lock, 9: install lock).
  nohup "${JAVA_CMD[@]}" kafka.Kafka "$CONFIG_FILE" </dev/null >>"$LOG_FILE" 2>&1 8>&- 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  log "started broker pid $pid on $ADDRESS (controller 127.0.0.1:$CONTROLLER_PORT, cluster $cluster_id, log $LOG_FILE)"
  if ! wait_ready "$pid"; then
    tail -n 30 "$LOG_FILE" >&2 || true
    if is_our_broker "$pid"; then stop_pid "$pid"; fi
    rm -f "$PID_FILE"
    die "broker on $ADDRESS did not become ready within ${START_TIMEOUT}s; see $LOG_FILE"
  fi
  echo "$ADDRESS"
}

stop_pid() {
  local pid="$1" waited=0
  kill -TERM "$pid" 2>/dev/null || true
  while is_our_broker "$pid"; do
    if [ "$waited" -ge $((STOP_TIMEOUT * 10)) ]; then
      log "broker pid $pid still up after ${STOP_TIMEOUT}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  waited=0
  while is_our_broker "$pid" && [ "$waited" -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
}

cmd_stop() {
  if [ ! -d "$STATE_DIR" ]; then log "no broker state for port $PORT; nothing to stop"; return 0; fi
  local pid
  pid="$(running_pid)"
  if [ -z "$pid" ]; then
    rm -f "$PID_FILE"
    log "broker on $ADDRESS is not running"
    return 0
  fi
  stop_pid "$pid"
  if is_our_broker "$pid"; then die "broker pid $pid did not stop"; fi
  rm -f "$PID_FILE"
  [ "${KAFKA_KEEP_DATA:-0}" = 1 ] || rm -rf "$DATA_DIR"
  log "stopped broker pid $pid on $ADDRESS"
}

cmd_status() {
  if [ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
    echo "external $KAFKA_BOOTSTRAP_SERVERS (KAFKA_BOOTSTRAP_SERVERS)"
    return 0
  fi
  local pid
  pid="$(running_pid)"
  if [ -n "$pid" ]; then
    echo "running pid $pid on $ADDRESS"
    return 0
  fi
  echo "not running on $ADDRESS"
  return 3
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: $0 {install|start|stop|status}" >&2; exit 2 ;;
esac
