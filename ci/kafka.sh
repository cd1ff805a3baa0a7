#!/usr/bin/env bash
# Local Apache Kafka (KRaft, combined broker+controller nodes, loopback only, no Docker)
# for development and CI.
#
# The broker comes from Maven Central: ci/kafka/pom.xml pins the version, Maven fetches the
# jars once into ci/.cache/ (git-ignored) and later runs use that cache without the network.
# KAFKA_VERSION picks another 3.x or 4.x release (ci/compat.sh runs the tests on several).
# Cluster state (data, logs, pids) lives in .kafka/ at the repository root (git-ignored).
#
# Run `ci/kafka.sh help` for the commands. The bootstrap address is the last line that
# `start` prints on stdout; everything else goes to stderr, so BOOT=$(ci/kafka.sh start 3)
# works.
#
# Besides the plain 1-node and 3-node clusters there is the `secured` one: one node whose
# client listeners are SASL_SSL (a throw-away CA and broker certificate made here with
# openssl, SCRAM and PLAIN users, OAUTHBEARER with unsigned tokens, KRaft's
# StandardAuthorizer on); its second client listener ends every SASL session after a
# few seconds (KIP-368), for the tests of re-authentication.
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd -- "$script_dir/.." && pwd -P)
conf_dir=$script_dir/kafka
pom=$conf_dir/pom.xml

cache_dir=${KAFKA_CACHE_DIR:-$repo_root/ci/.cache}
state_dir=${KAFKA_STATE_DIR:-$repo_root/.kafka}
start_timeout=${KAFKA_START_TIMEOUT:-120}
stop_timeout=${KAFKA_STOP_TIMEOUT:-30}
# Brokers start quickly and small by default (the test suites start clusters often); the
# "stock" profile runs them as Kafka's own start scripts do (kafka-server-start.sh and
# kafka-run-class.sh: a 1 GiB heap, G1, the full JIT), for benchmarks.
case ${KAFKA_JVM_PROFILE:-quick} in
quick)
    default_heap="-Xmx512m -Xms256m"
    default_jvm="-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    ;;
stock)
    default_heap="-Xmx1G -Xms1G"
    default_jvm="-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent"
    ;;
*)
    printf 'kafka.sh: error: KAFKA_JVM_PROFILE must be quick or stock, got %s\n' "$KAFKA_JVM_PROFILE" >&2
    exit 2
    ;;
esac
heap_opts=${KAFKA_HEAP_OPTS:-$default_heap}
jvm_opts=${KAFKA_JVM_OPTS:-$default_jvm}
extra_props=${KAFKA_EXTRA_PROPERTIES:-}
port_1=${KAFKA_PORT_1:-19092}
port_3=${KAFKA_PORT_3:-29092}
port_s=${KAFKA_PORT_SECURED:-18092}
port_r=${KAFKA_PORT_SECURED_REAUTH:-$((port_s + 1))}
for p in "$port_1" "$port_3" "$port_s" "$port_r"; do
    if ! [[ $p =~ ^[1-9][0-9]*$ ]] || ((p > 65400)); then
        printf 'kafka.sh: error: KAFKA_PORT_1 / KAFKA_PORT_3 / KAFKA_PORT_SECURED / KAFKA_PORT_SECURED_REAUTH must be port numbers, got %s\n' "$p" >&2
        exit 2
    fi
done
java_bin=java
if [[ -n ${JAVA_HOME:-} ]]; then java_bin=$JAVA_HOME/bin/java; fi

# the transactional id the readiness check asks the transaction coordinator about
readiness_txn_id=kafka-sh-readiness-probe
# written into a broker's server.log each time this script starts it
log_marker='===== ci/kafka.sh starts'

# the secured cluster's users: name, password (SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN);
# admin is a super user, the others have no ACL until a test grants one
secured_users=(admin alice bob)
secured_password() { echo "$1-secret"; }
# the SASL session lifetime (KIP-368 connections.max.reauth.ms) of the secured cluster's
# second client listener: short, so a test sees several sessions end; the first listener
# sets none (sessions last as long as their connection)
reauth_ms=2000
# the password of the broker's PKCS#12 keystore (throw-away, like the certificates)
keystore_password=krabka-keystore
# the password of the client key the secured cluster's certificates come with
client_key_password=client-key-secret

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

usage() {
    local rc=${1:-2}
    if ((rc != 0)); then exec 1>&2; fi
    cat <<EOF
usage: ci/kafka.sh COMMAND [ARGS]

  provision               download Kafka $kafka_version into ci/.cache/ (once; later runs are offline)
  start [1|3|secured]     format (first time) and start the 1-node (default), 3-node or secured
                          cluster, wait until metadata and the transaction coordinator answer, then
                          print the bootstrap address as the last line on stdout; reuses a running
                          cluster
  stop [1|3|secured]      stop that cluster; without an argument, every cluster this script started
  status [1|3|secured]    show the clusters and their nodes; with a cluster, exit 3 unless fully up
  bootstrap [1|3|secured] print the bootstrap address of the cluster
  jvm BOOTSTRAP           print the JVM options (heap, collector, JIT) of the running local
                          cluster with that bootstrap address, or say it is not a local cluster
  settings secured [reauth]
                          print the librdkafka settings (key=value lines) of the secured cluster's
                          super user: bootstrap.servers, SASL_SSL, SCRAM-SHA-512, the CA file; with
                          reauth, bootstrap.servers is the listener whose SASL sessions end after
                          ${reauth_ms} ms
  node stop SIZE I        stop node I (1..SIZE) of a cluster (e.g. node stop 3 2)
  node start SIZE I       start node I again, wait until it is back in the metadata, print the
                          bootstrap address
  node upgrade SIZE I     a rolling upgrade's step: stop node I (SIGTERM) and start it on the same
                          data with KAFKA_VERSION's jars, newer than the version it ran; once every
                          node runs it, the cluster is that version's (finalize the feature levels
                          with tool features ... upgrade)
  clean [1|3|secured]     stop the cluster(s) and delete their data (and the secured cluster's
                          certificates)
  tool NAME [ARGS...]     run a Kafka command line tool with the cached jars, e.g.
                          tool topics --bootstrap-server 127.0.0.1:29092 --list
                          NAME: topics, transactions, metadata-quorum, broker-api-versions,
                          consumer-groups, console-producer, console-consumer, get-offsets,
                          features, storage, acls, or a fully qualified main class; on the
                          secured cluster add --command-config ${state_dir}/csecured/admin.properties
  help                    this text

clusters (all on 127.0.0.1; KRaft, every node is broker and controller):
  1-node: broker $port_1, inter-broker $((port_1 + 50)), controller $((port_1 + 100)); data in ${state_dir}/c1/
  3-node: brokers $port_3,$((port_3 + 1)),$((port_3 + 2)), inter-broker $((port_3 + 50)),$((port_3 + 51)),$((port_3 + 52)),
          controllers $((port_3 + 100)),$((port_3 + 101)),$((port_3 + 102)); data in ${state_dir}/c3/
  secured: 1 node; clients connect to SASL_SSL://localhost:$port_s (TLS; the broker's certificate
          names localhost only, so 127.0.0.1:$port_s fails hostname verification), or to the
          second SASL_SSL listener localhost:$port_r, the same but ending every SASL session
          after ${reauth_ms} ms (connections.max.reauth.ms, KIP-368: a client re-authenticates
          or reconnects); the broker's own listeners are PLAINTEXT on loopback: inter-broker
          $((port_s + 50)), controller $((port_s + 100)) (their principal, User:ANONYMOUS, is a
          super user: clients use SASL_SSL).
          SASL mechanisms SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; users (made at format time)
          ${secured_users[*]} with password <user>-secret; admin is the super user, the others
          have no ACL (StandardAuthorizer, no ACL = denied). OAUTHBEARER too, with Kafka's
          unsecured validator: any unsigned JWT (header {"alg":"none"}) with "sub" (the
          principal) and "exp" claims, e.g. sub admin. Certificates (made with openssl) in
          ${state_dir}/csecured/tls/: ca.pem (trust it: ssl.ca.location), other-ca.pem (a CA that
          signed nothing, for tests of an untrusted certificate), client.pem and client.key (a
          client certificate, its PKCS#8 key encrypted with the password client-key-secret; the
          broker requests client certificates and checks them); data in ${state_dir}/csecured/

environment:
  KAFKA_VERSION           the Kafka release to run (default $pinned_version, pinned in ci/kafka/pom.xml):
                          any 3.x or 4.x release on Maven Central, each in ci/.cache/kafka-<version>;
                          3.x logs through log4j 1 (ci/kafka/log4j-*.properties). A cluster keeps the
                          version it was formatted with: give another one its own KAFKA_STATE_DIR
  KAFKA_START_TIMEOUT     seconds start may take in total (default 120)
  KAFKA_STOP_TIMEOUT      seconds to wait after SIGTERM before SIGKILL (default 30)
  KAFKA_JVM_PROFILE       quick (default: quick to start, small) or stock (as Kafka's own start
                          scripts run a broker; the benchmarks use it): the defaults of the two below
  KAFKA_HEAP_OPTS         broker heap (quick "-Xmx512m -Xms256m", stock "-Xmx1G -Xms1G")
  KAFKA_JVM_OPTS          other broker JVM options (quick "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
                          stock "-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20
                          -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent")
  KAFKA_EXTRA_PROPERTIES  lines key=value appended to every node's server.properties
  KAFKA_JMX               when set, each broker serves its metrics over JMX on loopback, at its
                          broker port + 150 (as kafka-run-class.sh does with JMX_PORT), for
                          ci/broker-requests.sh
  KAFKA_PORT_1            first broker port of the 1-node cluster (default 19092)
  KAFKA_PORT_3            first broker port of the 3-node cluster (default 29092);
                          broker ports are PORT..PORT+2, controller ports are broker port + 100
  KAFKA_PORT_SECURED      SASL_SSL port of the secured cluster (default 18092)
  KAFKA_PORT_SECURED_REAUTH
                          the secured cluster's listener with short SASL sessions (default
                          KAFKA_PORT_SECURED + 1)
  KAFKA_STATE_DIR         cluster state folder (default <repo>/.kafka)
  KAFKA_CACHE_DIR         download cache (default <repo>/ci/.cache)
  JAVA_HOME               Java 17+ to use (default: java on PATH)
EOF
    exit "$rc"
}

now_ms() { date +%s%3N; }

# ---------------------------------------------------------------------------------------
# provisioning

# The version: pom.xml pins the default; KAFKA_VERSION picks any other 3.x or 4.x release
# on Maven Central (4.x with pom.xml and its version overridden, 3.x with pom-3.xml). Each
# version has its own cache folder. 3.x logs through log4j 1 (reload4j), 4.x through log4j2.
pinned_version=$(sed -n 's:.*<kafka\.version>\([^<]*\)</kafka\.version>.*:\1:p' "$pom" | head -n 1)
[[ -n $pinned_version ]] || die "no <kafka.version> in $pom"
kafka_version=${KAFKA_VERSION:-$pinned_version}
[[ $kafka_version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
    die "KAFKA_VERSION must be a release number such as 3.9.2 or $pinned_version, got '$kafka_version'"
case ${kafka_version%%.*} in
3)
    pom=$conf_dir/pom-3.xml
    log_opts=("-Dlog4j.configuration=file:$conf_dir/log4j-broker.properties")
    tool_log_opts=("-Dlog4j.configuration=file:$conf_dir/log4j-tools.properties")
    ;;
4)
    log_opts=("-Dlog4j2.configurationFile=$conf_dir/log4j2-broker.xml")
    tool_log_opts=("-Dlog4j2.configurationFile=$conf_dir/log4j2-tools.xml")
    ;;
*) die "KAFKA_VERSION must be a Kafka 3.x or 4.x release (KRaft), got $kafka_version" ;;
esac
dist_dir=$cache_dir/kafka-$kafka_version
libs_dir=$dist_dir/libs

# what a cache folder was provisioned from: the pom, and the version when it is not the
# pom's own (so the pinned version's folder keeps the digest it always had)
pom_digest() {
    if [[ $kafka_version == "$pinned_version" ]]; then
        sha256sum "$pom" | cut -d ' ' -f 1
    else
        { cat "$pom" && echo "kafka.version=$kafka_version"; } | sha256sum | cut -d ' ' -f 1
    fi
}

provisioned() {
    [[ -d $libs_dir && -f $dist_dir/provisioned && "$(cat "$dist_dir/provisioned")" == "$(pom_digest)" ]]
}

provision() {
    if provisioned; then return 0; fi
    command -v mvn >/dev/null || die "mvn (Maven) is needed to download Kafka once; install it (e.g. apt-get install maven)"
    mkdir -p "$dist_dir"
    exec 8>"$cache_dir/provision.lock"
    flock -w 600 8 || die "timed out waiting for another provisioning run ($cache_dir/provision.lock)"
    if provisioned; then
        exec 8>&-
        return 0
    fi
    local tmp=$dist_dir/libs.tmp.$$ mvn_log=$dist_dir/provision.log
    rm -rf "$tmp"
    local args=(-B -ntp -f "$pom" "-Dmaven.repo.local=$cache_dir/m2" "-Dkafka.version=$kafka_version"
        dependency:copy-dependencies "-DoutputDirectory=$tmp")
    log "provisioning Apache Kafka $kafka_version into ${dist_dir#"$repo_root"/} (Maven log: $mvn_log)"
    # offline first: a filled local repository needs no network
    if [[ -d $cache_dir/m2 ]] && mvn -o "${args[@]}" >"$mvn_log" 2>&1; then
        :
    else
        log "downloading Apache Kafka $kafka_version from Maven Central (only this once)"
        if ! mvn "${args[@]}" >"$mvn_log" 2>&1; then
            tail -n 40 "$mvn_log" >&2
            rm -rf "$tmp"
            die "Maven could not fetch Kafka $kafka_version (see $mvn_log)"
        fi
    fi
    compgen -G "$tmp/kafka_2.13-$kafka_version.jar" >/dev/null || die "kafka_2.13-$kafka_version.jar missing after Maven ran (see $mvn_log)"
    # pom.xml names the pinned version's log4j2; another 4.x gets the log4j2 its own modules
    # name (now in the local repository), so the broker runs with the logging it was built for
    local want pinned_log4j
    if [[ $kafka_version != "$pinned_version" && $pom == "$conf_dir/pom.xml" ]]; then
        pinned_log4j=$(sed -n 's:.*<log4j\.version>\([^<]*\)</log4j\.version>.*:\1:p' "$pom" | head -n 1)
        want=$(grep -h -A1 '<artifactId>log4j-' "$cache_dir/m2/org/apache/kafka/"*/"$kafka_version/"*.pom 2>/dev/null |
            sed -n 's:.*<version>\(2\.[^<]*\)</version>.*:\1:p' | sort -V | tail -n 1 || true)
        if [[ -n $want && $want != "$pinned_log4j" ]]; then
            log "Kafka $kafka_version's modules name log4j $want (pom.xml: $pinned_log4j); fetching that"
            rm -rf "$tmp"
            if ! mvn "${args[@]}" "-Dlog4j.version=$want" >>"$mvn_log" 2>&1; then
                tail -n 40 "$mvn_log" >&2
                rm -rf "$tmp"
                die "Maven could not fetch log4j $want for Kafka $kafka_version (see $mvn_log)"
            fi
        fi
    fi
    rm -rf "$libs_dir"
    mv "$tmp" "$libs_dir"
    pom_digest >"$dist_dir/provisioned"
    log "provisioned $(find "$libs_dir" -name '*.jar' | wc -l) jars in ${libs_dir#"$repo_root"/}"
    exec 8>&-
}

check_java() {
    command -v "$java_bin" >/dev/null || die "java not found (Kafka $kafka_version needs Java 17 or newer; set JAVA_HOME)"
    local v major
    v=$("$java_bin" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)
    major=${v%%.*}
    [[ $major =~ ^[0-9]+$ && $major -ge 17 ]] || die "Kafka $kafka_version needs Java 17 or newer; $java_bin is '${v:-unknown}'"
}

# JVM options of the Kafka command line tools: small and quick to start
tool_jvm_opts=(-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1)

# run a Kafka tool class with the cached jars; output as the tool writes it
tool_java() {
    local main=$1
    shift
    "$java_bin" "${tool_jvm_opts[@]}" "${tool_log_opts[@]}" -cp "$libs_dir/*" "$main" "$@"
}

# the same, killed after SECONDS
tool_java_within() {
    local secs=$1 main=$2
    shift 2
    timeout "$secs" "$java_bin" "${tool_jvm_opts[@]}" "${tool_log_opts[@]}" -cp "$libs_dir/*" "$main" "$@"
}

# Kafka moved its command line tools from the broker's Scala code (kafka.admin, kafka.tools)
# to org.apache.kafka.tools during 3.x: a tool is the first of its classes (newest place
# first) that the cached jars hold
tool_classes() {
    case $1 in
    topics) echo org.apache.kafka.tools.TopicCommand kafka.admin.TopicCommand ;;
    transactions) echo org.apache.kafka.tools.TransactionsCommand ;;
    metadata-quorum) echo org.apache.kafka.tools.MetadataQuorumCommand ;;
    broker-api-versions) echo org.apache.kafka.tools.BrokerApiVersionsCommand kafka.admin.BrokerApiVersionsCommand ;;
    consumer-groups) echo org.apache.kafka.tools.consumer.group.ConsumerGroupCommand kafka.admin.ConsumerGroupCommand ;;
    console-producer) echo org.apache.kafka.tools.ConsoleProducer kafka.tools.ConsoleProducer ;;
    console-consumer) echo org.apache.kafka.tools.consumer.ConsoleConsumer kafka.tools.ConsoleConsumer ;;
    get-offsets) echo org.apache.kafka.tools.GetOffsetShell kafka.tools.GetOffsetShell ;;
    features) echo org.apache.kafka.tools.FeatureCommand kafka.admin.FeatureCommand ;;
    leader-election) echo org.apache.kafka.tools.LeaderElectionCommand kafka.admin.LeaderElectionCommand ;;
    storage) echo kafka.tools.StorageTool ;;
    acls) echo org.apache.kafka.tools.AclCommand kafka.admin.AclCommand ;;
    esac
}

# the classes of the broker and tools jars, one per line (listed once per cache folder)
class_index() {
    local idx=$dist_dir/classes.txt tmp j
    if [[ ! -s $idx ]]; then
        tmp=$idx.tmp.$$
        for j in "$libs_dir"/kafka_2.13-*.jar "$libs_dir"/kafka-tools-*.jar; do
            [[ -f $j ]] || continue
            if command -v unzip >/dev/null; then unzip -Z1 "$j"; else "${java_bin%java}jar" tf "$j"; fi
        done | sed -n 's:\.class$::p' | tr / . >"$tmp"
        mv "$tmp" "$idx"
    fi
    echo "$idx"
}

# the main class of tool NAME in this Kafka version (set in $tool_main_class)
tool_main_class=
find_tool() {
    local idx c
    idx=$(class_index)
    for c in $(tool_classes "$1"); do
        if grep -qxF "$c" "$idx"; then
            tool_main_class=$c
            return 0
        fi
    done
    die "Kafka $kafka_version has none of the classes of the tool $1 ($(tool_classes "$1"))"
}

# ---------------------------------------------------------------------------------------
# cluster layout

# a cluster is named by its size (1, 3) or is `secured` (one node); `size` below is that name
check_size() {
    [[ ${1:-} == 1 || ${1:-} == 3 || ${1:-} == secured ]] || {
        log "cluster must be 1, 3 or secured, got '${1:-}'"
        usage
    }
}

# the number of nodes of a cluster
nodes_of() { if [[ $1 == secured ]]; then echo 1; else echo "$1"; fi; }

base_port() {
    case $1 in
    1) echo "$port_1" ;;
    3) echo "$port_3" ;;
    secured) echo "$port_s" ;;
    esac
}
broker_port() { echo $(($(base_port "$1") + $2 - 1)); }
controller_port() { echo $(($(broker_port "$1" "$2") + 100)); }
# the PLAINTEXT inter-broker listener (every cluster's; the secured one's clients use
# SASL_SSL)
internal_port() { echo $(($(broker_port "$1" "$2") + 50)); }
jmx_port() { echo $(($(broker_port "$1" "$2") + 150)); }
# the secured cluster's SASL_SSL listener with short SASL sessions
reauth_port() { echo $((port_r + $2 - 1)); }
# the host clients connect to: the secured cluster's certificate names localhost only
client_host() { if [[ $1 == secured ]]; then echo localhost; else echo 127.0.0.1; fi; }
tls_dir() { echo "$state_dir/csecured/tls"; }
cluster_dir() { echo "$state_dir/c$1"; }
node_dir() { echo "$state_dir/c$1/n$2"; }

bootstrap_of() {
    local size=$1 i out= n host
    n=$(nodes_of "$size")
    host=$(client_host "$size")
    for ((i = 1; i <= n; i++)); do
        out+="${out:+,}$host:$(broker_port "$size" "$i")"
    done
    echo "$out"
}

voters_of() {
    local size=$1 i out= n
    n=$(nodes_of "$size")
    for ((i = 1; i <= n; i++)); do
        out+="${out:+,}$i@127.0.0.1:$(controller_port "$size" "$i")"
    done
    echo "$out"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# the pid of node I if it is alive and is the broker this script started for that node
node_pid() {
    local ndir pid cmdline
    ndir=$(node_dir "$1" "$2")
    [[ -f $ndir/pid ]] || return 1
    pid=$(<"$ndir/pid")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    if [[ -r /proc/$pid/cmdline ]]; then
        cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
        [[ $cmdline == *"$ndir/server.properties"* ]] || return 1
    fi
    echo "$pid"
}

node_up() { node_pid "$1" "$2" >/dev/null && port_open "$(broker_port "$1" "$2")"; }

lock_cluster() {
    mkdir -p "$state_dir"
    exec 9>"$state_dir/c$1.lock"
    flock -w 600 9 || die "timed out waiting for another ci/kafka.sh on cluster $1"
}

# write node I's server.properties (to OUT, default the node's own file)
write_props() {
    local size=$1 i=$2 ndir rf min_isr text out
    ndir=$(node_dir "$size" "$i")
    out=${3:-$ndir/server.properties}
    if [[ $(nodes_of "$size") == 1 ]]; then rf=1 min_isr=1; else rf=3 min_isr=2; fi
    text=$(<"$conf_dir/server.properties.in")
    text=${text//@NODE_ID@/"$i"}
    text=${text//@VOTERS@/"$(voters_of "$size")"}
    text=${text//@BROKER_PORT@/"$(broker_port "$size" "$i")"}
    text=${text//@CONTROLLER_PORT@/"$(controller_port "$size" "$i")"}
    text=${text//@INTERNAL_PORT@/"$(internal_port "$size" "$i")"}
    text=${text//@LOG_DIR@/"$ndir/data"}
    text=${text//@RF@/"$rf"}
    text=${text//@MIN_ISR@/"$min_isr"}
    printf '%s\n' "$text" >"$out"
    if [[ $size == secured ]]; then
        local u plain_users=
        for u in "${secured_users[@]}"; do plain_users+=" user_$u=\"$(secured_password "$u")\""; done
        text=$(<"$conf_dir/secured.properties.in")
        text=${text//@BROKER_PORT@/"$(broker_port "$size" "$i")"}
        text=${text//@REAUTH_PORT@/"$(reauth_port "$size" "$i")"}
        text=${text//@REAUTH_MS@/"$reauth_ms"}
        text=${text//@INTERNAL_PORT@/"$(internal_port "$size" "$i")"}
        text=${text//@CONTROLLER_PORT@/"$(controller_port "$size" "$i")"}
        text=${text//@PLAIN_USERS@/"$plain_users"}
        text=${text//@KEYSTORE@/"$(tls_dir)/broker.p12"}
        text=${text//@KEYSTORE_PASSWORD@/"$keystore_password"}
        text=${text//@TRUSTSTORE@/"$(tls_dir)/ca.pem"}
        printf '\n%s\n' "$text" >>"$out"
    fi
    if [[ -n $extra_props ]]; then
        printf '\n# from KAFKA_EXTRA_PROPERTIES\n%s\n' "$extra_props" >>"$out"
    fi
}

# true when running node I was started with the settings this script would write now
props_current() {
    local size=$1 i=$2 ndir now rc=0
    ndir=$(node_dir "$size" "$i")
    now=$(mktemp "$ndir/server.properties.now.XXXXXX")
    write_props "$size" "$i" "$now"
    cmp -s "$now" "$ndir/server.properties" || rc=1
    rm -f "$now"
    return "$rc"
}

# a random Kafka Uuid: 16 bytes, URL-safe base64 without padding, not starting with '-'
new_cluster_id() {
    local id
    while :; do
        id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
        [[ $id == -* ]] || break
    done
    echo "$id"
}

cluster_id() {
    local size=$1 cdir i meta id n
    cdir=$(cluster_dir "$size")
    n=$(nodes_of "$size")
    if [[ ! -s $cdir/cluster.id ]]; then
        id=
        for ((i = 1; i <= n; i++)); do
            meta=$(node_dir "$size" "$i")/data/meta.properties
            if [[ -f $meta ]]; then
                id=$(sed -n 's/^cluster\.id=//p' "$meta")
                break
            fi
        done
        echo "${id:-$(new_cluster_id)}" >"$cdir/cluster.id"
    fi
    cat "$cdir/cluster.id"
}

# A cluster's data is formatted by one Kafka version (recorded in <cluster>/kafka.version);
# starting it with another (KAFKA_VERSION) is refused: a downgrade may not read it, and
# a test would not be run on the version it asks for. `node upgrade` moves one node to a
# newer version (recorded in <cluster>/n<I>/kafka.version until every node runs it, then
# in <cluster>/kafka.version again); a node then starts with its own version only.
node_version() {
    local size=$1 i=$2 f
    f=$(node_dir "$size" "$i")/kafka.version
    if [[ -s $f ]]; then cat "$f"; elif [[ -s $(cluster_dir "$size")/kafka.version ]]; then
        cat "$(cluster_dir "$size")/kafka.version"
    fi
}

check_cluster_version() {
    local size=$1 f was i n
    n=$(nodes_of "$size")
    for ((i = 1; i <= n; i++)); do
        if [[ -n ${2:-} && $i != "$2" ]]; then continue; fi
        was=$(node_version "$size" "$i")
        [[ -z $was || $was == "$kafka_version" ]] && continue
        f=$(node_dir "$size" "$i")/kafka.version
        if [[ -s $f ]]; then
            die "node $i of cluster $size in ${state_dir} was upgraded to Kafka $was, not $kafka_version (KAFKA_VERSION): start it with KAFKA_VERSION=$was, or upgrade the other nodes (ci/kafka.sh node upgrade $size I)"
        fi
        die "cluster $size in ${state_dir} was made by Kafka $was, not $kafka_version (KAFKA_VERSION); use another KAFKA_STATE_DIR, or delete it: KAFKA_VERSION=$was ci/kafka.sh clean $size"
    done
}

# format the storage of the given nodes that have none yet (in parallel)
format_nodes() {
    local size=$1 i ndir cid pids=() failed=0 u m extra=()
    shift
    cid=$(cluster_id "$size")
    if [[ $size == secured ]]; then
        # the SCRAM credentials go into the metadata log's bootstrap records
        for u in "${secured_users[@]}"; do
            for m in SCRAM-SHA-256 SCRAM-SHA-512; do
                extra+=(--add-scram "$m=[name=$u,password=$(secured_password "$u")]")
            done
        done
    fi
    for i in "$@"; do
        ndir=$(node_dir "$size" "$i")
        [[ -f $ndir/data/meta.properties ]] && continue
        log "formatting node $i of cluster $size (cluster id $cid)"
        tool_java kafka.tools.StorageTool format -t "$cid" -c "$ndir/server.properties" ${extra[@]+"${extra[@]}"} \
            >"$ndir/format.log" 2>&1 9>&- &
        pids+=("$!:$i")
    done
    for p in ${pids[@]+"${pids[@]}"}; do
        if ! wait "${p%%:*}"; then
            ndir=$(node_dir "$size" "${p#*:}")
            cat "$ndir/format.log" >&2
            log "formatting node ${p#*:} of cluster $size failed"
            failed=1
        fi
    done
    if ((failed == 0)); then echo "$kafka_version" >"$(cluster_dir "$size")/kafka.version"; fi
    return "$failed"
}

launch_node() {
    local size=$1 i=$2 ndir port heap jvm
    ndir=$(node_dir "$size" "$i")
    local ports=("$(broker_port "$size" "$i")" "$(controller_port "$size" "$i")" "$(internal_port "$size" "$i")")
    if [[ $size == secured ]]; then ports+=("$(reauth_port "$size" "$i")"); fi
    for port in "${ports[@]}"; do
        if port_open "$port"; then
            die "port $port of node $i of cluster $size is taken by a process this script did not start"
        fi
    done
    read -r -a heap <<<"$heap_opts"
    read -r -a jvm <<<"$jvm_opts"
    if [[ -n ${KAFKA_JMX:-} ]]; then
        # As kafka-run-class.sh does with JMX_PORT: the broker's own metrics over JMX, on
        # loopback, for ci/broker-requests.sh (the request latencies the broker measures).
        local jmx
        jmx=$(jmx_port "$size" "$i")
        if port_open "$jmx"; then die "JMX port $jmx of node $i of cluster $size is taken"; fi
        jvm+=(-Dcom.sun.management.jmxremote -Dcom.sun.management.jmxremote.authenticate=false
            -Dcom.sun.management.jmxremote.ssl=false "-Dcom.sun.management.jmxremote.port=$jmx"
            "-Dcom.sun.management.jmxremote.rmi.port=$jmx" -Djava.rmi.server.hostname=127.0.0.1
            -Dcom.sun.management.jmxremote.host=127.0.0.1)
    fi
    rm -f "$ndir/pid"
    # a marker in the broker log, so a failure report shows only this start's lines
    printf '[%s] %s node %s of cluster %s\n' "$(date '+%F %T,%3N')" "$log_marker" "$i" "$size" >>"$ndir/server.log"
    # own session: the broker outlives this script and the caller's terminal; the child
    # records its own pid before it becomes the JVM, and does not inherit the lock fds
    local launcher=()
    if command -v setsid >/dev/null; then launcher=(setsid); fi
    # shellcheck disable=SC2016 # $$, $0 and $@ are for the inner sh
    ${launcher[@]+"${launcher[@]}"} sh -c 'echo $$ >"$0" && exec "$@"' "$ndir/pid" \
        "$java_bin" ${heap[@]+"${heap[@]}"} ${jvm[@]+"${jvm[@]}"} \
        -Djava.awt.headless=true -XX:+ExitOnOutOfMemoryError "-XX:ErrorFile=$ndir/hs_err_%p.log" \
        "-Dkafka.logs.dir=$ndir" "${log_opts[@]}" \
        -cp "$libs_dir/*" kafka.Kafka "$ndir/server.properties" \
        </dev/null >"$ndir/stdout.log" 2>&1 8>&- 9>&- &
    local n
    for ((n = 0; n < 100; n++)); do
        [[ -s $ndir/pid ]] && break
        sleep 0.05
    done
    [[ -s $ndir/pid ]] || die "node $i of cluster $size did not start (no pid recorded)"
    log "started node $i of cluster $size (pid $(<"$ndir/pid"), broker $(client_host "$size"):$(broker_port "$size" "$i"))"
}

show_node_log() {
    local size=$1 i=$2 ndir
    ndir=$(node_dir "$size" "$i")
    {
        echo "----- last 60 lines of ${ndir#"$repo_root"/}/server.log (this start) -----"
        if [[ -f $ndir/server.log ]]; then
            awk -v m="$log_marker" 'index($0, m) { n = 0 } { line[++n % 60] = $0 } END { for (k = (n > 60 ? n - 59 : 1); k <= n; k++) print line[k % 60] }' "$ndir/server.log"
        else
            echo "(no server.log)"
        fi
        if [[ -s $ndir/stdout.log ]]; then
            echo "----- last 20 lines of ${ndir#"$repo_root"/}/stdout.log -----"
            tail -n 20 "$ndir/stdout.log"
        fi
        echo "-----"
    } >&2
}

# signal the given nodes, wait for them to exit, then SIGKILL what is left.
# A combined node's graceful shutdown needs the controller quorum to approve it; once a
# majority of the cluster's nodes are gone that can never happen (the node would wait for
# minutes), so then the rest get a short grace period instead of the full timeout.
stop_nodes() {
    local size=$1 i p pid now deadline quorum_lost_at=0 pids=() alive running n
    shift
    n=$(nodes_of "$size")
    rm -f "$(cluster_dir "$size")/ready"
    for i in "$@"; do
        if pid=$(node_pid "$size" "$i"); then
            log "stopping node $i of cluster $size (pid $pid)"
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid:$i")
        else
            rm -f "$(node_dir "$size" "$i")/pid"
        fi
    done
    [[ ${#pids[@]} -gt 0 ]] || return 0
    deadline=$(($(now_ms) + stop_timeout * 1000))
    while :; do
        alive=()
        for p in "${pids[@]}"; do
            if node_pid "$size" "${p#*:}" >/dev/null; then alive+=("$p"); fi
        done
        [[ ${#alive[@]} -gt 0 ]] || break
        now=$(now_ms)
        running=0
        for ((i = 1; i <= n; i++)); do
            if node_pid "$size" "$i" >/dev/null; then running=$((running + 1)); fi
        done
        if ((running < n / 2 + 1 && quorum_lost_at == 0)); then
            quorum_lost_at=$now
            deadline=$((now + 5000 < deadline ? now + 5000 : deadline))
        fi
        if ((now > deadline)); then
            for p in "${alive[@]}"; do
                if ((quorum_lost_at > 0)); then
                    log "node ${p#*:} of cluster $size (pid ${p%%:*}) is still up 5s after the controller quorum was lost (it cannot finish a controlled shutdown); sending SIGKILL"
                else
                    log "node ${p#*:} of cluster $size (pid ${p%%:*}) ignored SIGTERM for ${stop_timeout}s; sending SIGKILL"
                fi
                kill -KILL "${p%%:*}" 2>/dev/null || true
            done
            for ((i = 0; i < 50; i++)); do
                running=0
                for p in "${alive[@]}"; do
                    if kill -0 "${p%%:*}" 2>/dev/null && [[ -s /proc/${p%%:*}/cmdline ]]; then running=1; fi
                done
                ((running)) || break
                sleep 0.1
            done
            break
        fi
        sleep 0.2
    done
    for p in "${pids[@]}"; do rm -f "$(node_dir "$size" "${p#*:}")/pid"; done
}

# client settings of the readiness checks: give up on a silent broker quickly and retry;
# on the secured cluster, the super user over SASL_SSL (the Java tools take them with
# --command-config)
admin_props() {
    local size=$1 f=$state_dir/readiness-admin.properties
    if [[ $size == secured ]]; then
        f=$(cluster_dir "$size")/admin.properties
        if [[ ! -f $f ]]; then
            mkdir -p "$(cluster_dir "$size")"
            printf '%s\n' request.timeout.ms=5000 default.api.timeout.ms=15000 \
                security.protocol=SASL_SSL sasl.mechanism=SCRAM-SHA-512 \
                "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"$(secured_password admin)\";" \
                ssl.truststore.type=PEM "ssl.truststore.location=$(tls_dir)/ca.pem" >"$f"
        fi
    elif [[ ! -f $f ]]; then
        mkdir -p "$state_dir"
        printf '%s\n' request.timeout.ms=5000 default.api.timeout.ms=15000 >"$f"
    fi
    echo "$f"
}

# the secured cluster's certificates, made once (kept until `clean secured`):
#   ca.pem, ca.key         a throw-away CA
#   broker.pem, broker.key the broker's certificate, signed by it, for DNS:localhost ONLY (no
#                          IP address: a client connecting to 127.0.0.1 with hostname
#                          verification on must fail)
#   broker.p12             the broker's key and chain as the PKCS#12 keystore it reads
#   other-ca.pem           a second CA that signed nothing (a client trusting only it must fail)
#   client.pem, client.key a client certificate signed by the CA, its key encrypted (PKCS#8,
#                          AES-256) with the password client-key-secret: the broker requests
#                          client certificates (ssl.client.auth=requested) and checks them
make_tls() {
    local dir log
    dir=$(tls_dir)
    [[ -f $dir/ready ]] && return 0
    command -v openssl >/dev/null || die "openssl is needed to make the secured cluster's certificates (apt-get install openssl)"
    rm -rf "$dir"
    mkdir -p "$dir"
    log=$dir/openssl.log
    log "making a throw-away CA and the broker's certificate (localhost) in $dir"
    # one && chain: `set -e` does not act inside a tested subshell
    if ! (
        cd "$dir" &&
            printf '%s\n' '[req]' 'distinguished_name = dn' 'prompt = no' 'x509_extensions = ext' \
                '[dn]' 'CN = krabka-coordination throw-away test CA' \
                '[ext]' 'basicConstraints = critical,CA:TRUE' 'keyUsage = critical,keyCertSign,cRLSign' \
                'subjectKeyIdentifier = hash' >ca.cnf &&
            printf '%s\n' 'basicConstraints = critical,CA:FALSE' \
                'keyUsage = critical,digitalSignature,keyEncipherment' 'extendedKeyUsage = serverAuth' \
                'subjectAltName = DNS:localhost' 'subjectKeyIdentifier = hash' \
                'authorityKeyIdentifier = keyid' >broker.ext &&
            openssl req -x509 -new -newkey rsa:2048 -nodes -sha256 -days 3650 -config ca.cnf \
                -keyout ca.key -out ca.pem &&
            openssl req -x509 -new -newkey rsa:2048 -nodes -sha256 -days 3650 -config ca.cnf \
                -subj "/CN=krabka-coordination other test CA (signed nothing)" \
                -keyout other-ca.key -out other-ca.pem &&
            openssl req -new -newkey rsa:2048 -nodes -subj /CN=localhost -keyout broker.key -out broker.csr &&
            openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" \
                -days 3650 -sha256 -extfile broker.ext -out broker.pem &&
            openssl pkcs12 -export -in broker.pem -inkey broker.key -certfile ca.pem -name broker \
                -passout "pass:$keystore_password" -out broker.p12 &&
            printf '%s\n' 'basicConstraints = critical,CA:FALSE' 'keyUsage = critical,digitalSignature' \
                'extendedKeyUsage = clientAuth' 'subjectKeyIdentifier = hash' \
                'authorityKeyIdentifier = keyid' >client.ext &&
            openssl req -new -newkey rsa:2048 -nodes -subj /CN=krabka-test-client -keyout client-plain.key \
                -out client.csr &&
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" \
                -days 3650 -sha256 -extfile client.ext -out client.pem &&
            openssl pkcs8 -topk8 -v2 aes-256-cbc -in client-plain.key -passout "pass:$client_key_password" \
                -out client.key &&
            rm -f other-ca.key broker.csr client.csr client-plain.key &&
            openssl verify -CAfile ca.pem broker.pem client.pem
    ) >"$log" 2>&1; then
        cat "$log" >&2
        die "making the secured cluster's certificates failed (see $log)"
    fi
    touch "$dir/ready"
}

# how to connect to the secured cluster, for people (stderr)
show_secured() {
    local u users=()
    for u in "${secured_users[@]}"; do users+=("$u/$(secured_password "$u")"); done
    log "secured cluster: SASL_SSL on $(bootstrap_of secured) (TLS; the certificate names localhost only)"
    log "  trust the CA $(tls_dir)/ca.pem (ssl.ca.location); $(tls_dir)/other-ca.pem signed nothing"
    log "  users (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN): ${users[*]}; admin is the super user, the others have no ACL"
    log "  OAUTHBEARER: an unsigned JWT (alg none) with claims sub (the principal, e.g. admin) and exp"
    log "  localhost:$(reauth_port secured 1): the same, SASL sessions end after ${reauth_ms} ms (KIP-368)"
    log "  librdkafka settings: ci/kafka.sh settings secured [reauth]; Java tools: --command-config $(admin_props secured)"
}

# seconds a readiness check may take: at most 30, and not much past the start deadline
check_secs() {
    local left=$((($1 - $(now_ms)) / 1000))
    if ((left > 30)); then echo 30; elif ((left < 5)); then echo 5; else echo "$left"; fi
}

# ids of the brokers that the cluster's metadata lists (one per line)
metadata_brokers() {
    local size=$1 deadline=$2 out
    find_tool broker-api-versions
    out=$(tool_java_within "$(check_secs "$deadline")" "$tool_main_class" \
        --bootstrap-server "$(bootstrap_of "$size")" --command-config "$(admin_props "$size")" 2>/dev/null) || return 1
    sed -n 's/^[^ ]*:[0-9]* (id: \([0-9]*\) rack.*/\1/p' <<<"$out" | sort -u
}

# true once the transaction coordinator of the probe id answers: FindCoordinator found a
# loaded coordinator (this creates the transaction state log the first time) and
# DescribeTransactions answered, with "not found" for this never used id
txn_coordinator_answers() {
    local size=$1 deadline=$2 out
    find_tool transactions
    out=$(tool_java_within "$(check_secs "$deadline")" "$tool_main_class" \
        --bootstrap-server "$(bootstrap_of "$size")" --command-config "$(admin_props "$size")" describe --transactional-id "$readiness_txn_id" 2>&1) && return 0
    [[ $out == *TransactionalIdNotFound* || $out == *"ID could not be found"* ]]
}

# fail start: show the logs of the nodes concerned, stop what this run started, exit 1
fail_start() {
    local size=$1 why=$2 i
    shift 2
    log "$why"
    for i in "$@"; do show_node_log "$size" "$i"; done
    if [[ ${#started[@]} -gt 0 ]]; then
        log "stopping the nodes this run started: ${started[*]}"
        stop_nodes "$size" "${started[@]}"
    fi
    exit 1
}

# wait until the given nodes answer on their broker port and the metadata lists them; with
# mode `full` also until the transaction coordinator answers
wait_ready() {
    local size=$1 deadline=$2 mode=$3 i brokers missing all=() n
    shift 3
    local want=("$@")
    n=$(nodes_of "$size")
    for ((i = 1; i <= n; i++)); do all+=("$i"); done
    for i in "${want[@]}"; do
        while ! port_open "$(broker_port "$size" "$i")"; do
            node_pid "$size" "$i" >/dev/null || fail_start "$size" "node $i of cluster $size exited while starting" "$i"
            (($(now_ms) < deadline)) || fail_start "$size" "node $i of cluster $size did not open its port within ${start_timeout}s" "$i"
            sleep 0.2
        done
    done
    log "broker ports answer; waiting for the metadata to list broker(s) ${want[*]}"
    while :; do
        brokers=$(metadata_brokers "$size" "$deadline" || true)
        missing=()
        for i in "${want[@]}"; do
            grep -qx "$i" <<<"$brokers" || missing+=("$i")
        done
        [[ ${#missing[@]} -gt 0 ]] || break
        for i in "${want[@]}"; do
            node_pid "$size" "$i" >/dev/null || fail_start "$size" "node $i of cluster $size exited while starting" "$i"
        done
        (($(now_ms) < deadline)) || fail_start "$size" "metadata of cluster $size did not list broker(s) ${missing[*]} within ${start_timeout}s" "${missing[@]}"
        sleep 0.5
    done
    [[ $mode == full ]] || return 0
    log "metadata lists broker(s) ${want[*]}; waiting for the transaction coordinator"
    until txn_coordinator_answers "$size" "$deadline"; do
        for i in "${all[@]}"; do
            node_pid "$size" "$i" >/dev/null || fail_start "$size" "node $i of cluster $size exited while starting" "$i"
        done
        (($(now_ms) < deadline)) || fail_start "$size" "the transaction coordinator of cluster $size did not answer within ${start_timeout}s" "${all[@]}"
        sleep 0.5
    done
}

# ---------------------------------------------------------------------------------------
# commands

started=()

cmd_start() {
    local size=${1:-1} t0 deadline i cdir ndir todo=() n
    check_size "$size"
    n=$(nodes_of "$size")
    t0=$(now_ms)
    deadline=$((t0 + start_timeout * 1000))
    provision
    lock_cluster "$size"
    check_cluster_version "$size"
    cdir=$(cluster_dir "$size")
    for ((i = 1; i <= n; i++)); do
        node_up "$size" "$i" || todo+=("$i")
    done
    if [[ ${#todo[@]} -eq 0 && -f $cdir/ready ]]; then
        for ((i = 1; i <= n; i++)); do
            props_current "$size" "$i" ||
                die "cluster $size is running with other settings than ci/kafka/*.properties.in and the environment give now (node $i); restart it: ci/kafka.sh stop $size && ci/kafka.sh start $size"
        done
        log "cluster $size is already running; reusing it"
        if [[ $size == secured ]]; then show_secured; fi
        bootstrap_of "$size"
        return 0
    fi
    check_java
    if [[ $size == secured ]]; then make_tls; fi
    for i in "${todo[@]}"; do
        if node_pid "$size" "$i" >/dev/null; then continue; fi # alive, port not open yet
        ndir=$(node_dir "$size" "$i")
        mkdir -p "$ndir"
        write_props "$size" "$i"
    done
    local to_launch=()
    for i in "${todo[@]}"; do
        node_pid "$size" "$i" >/dev/null || to_launch+=("$i")
    done
    if [[ ${#to_launch[@]} -gt 0 ]]; then
        format_nodes "$size" "${to_launch[@]}" || exit 1
        for i in "${to_launch[@]}"; do
            launch_node "$size" "$i"
            started+=("$i")
        done
    fi
    local want=()
    for ((i = 1; i <= n; i++)); do want+=("$i"); done
    wait_ready "$size" "$deadline" full "${want[@]}"
    touch "$cdir/ready"
    local tenths=$((($(now_ms) - t0 + 50) / 100))
    log "cluster $size ready in $((tenths / 10)).$((tenths % 10)) s"
    if [[ $size == secured ]]; then show_secured; fi
    bootstrap_of "$size"
}

cmd_stop() {
    local sizes=("$@") size
    if [[ ${#sizes[@]} -eq 0 ]]; then sizes=(1 3 secured); fi
    for size in "${sizes[@]}"; do check_size "$size"; done
    for size in "${sizes[@]}"; do
        [[ -d $(cluster_dir "$size") ]] || continue
        lock_cluster "$size"
        stop_cluster "$size"
    done
}

stop_cluster() {
    local size=$1 i nodes=() n
    n=$(nodes_of "$size")
    for ((i = 1; i <= n; i++)); do nodes+=("$i"); done
    stop_nodes "$size" "${nodes[@]}"
    log "cluster $size stopped"
}

cmd_clean() {
    local sizes=("$@") size
    if [[ ${#sizes[@]} -eq 0 ]]; then sizes=(1 3 secured); fi
    for size in "${sizes[@]}"; do check_size "$size"; done
    for size in "${sizes[@]}"; do
        [[ -d $(cluster_dir "$size") ]] || continue
        lock_cluster "$size"
        stop_cluster "$size"
        rm -rf "$(cluster_dir "$size")"
        log "deleted the data of cluster $size"
    done
}

# The heap, collector and JIT options a running broker was started with.
jvm_of() {
    tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null |
        grep -E '^-(Xm[sx]|XX:\+Use[A-Za-z0-9]+GC|XX:TieredStopAtLevel=)' | paste -sd ' ' -
}

cmd_status() {
    local sizes=("$@") size i pid up n state rc=0 port count
    if [[ ${#sizes[@]} -eq 0 ]]; then sizes=(1 3 secured); fi
    for size in "${sizes[@]}"; do
        check_size "$size"
        count=$(nodes_of "$size")
        up=0
        n=()
        for ((i = 1; i <= count; i++)); do
            port=$(broker_port "$size" "$i")
            if pid=$(node_pid "$size" "$i"); then
                if port_open "$port"; then
                    state="running (pid $pid) with JVM $(jvm_of "$pid")"
                    up=$((up + 1))
                else
                    state="starting (pid $pid, port not answering)"
                fi
            elif [[ -f $(node_dir "$size" "$i")/data/meta.properties ]]; then
                state="stopped"
            else
                state="not created"
            fi
            n+=("  node $i: $state, broker $(client_host "$size"):$port, controller 127.0.0.1:$(controller_port "$size" "$i"), dir ${state_dir}/c$size/n$i")
        done
        if ((up == count)); then
            state=running
        elif [[ ! -f $(cluster_dir "$size")/cluster.id ]]; then
            state="not created"
        elif ((up == 0)); then
            state=stopped
        else
            state="partly running ($up of $count)"
        fi
        ((up == count)) || rc=3
        echo "cluster $size: $state, bootstrap $(bootstrap_of "$size")"
        printf '%s\n' "${n[@]}"
    done
    if [[ $# -gt 0 ]]; then return "$rc"; fi
}

cmd_node() {
    [[ $# -eq 3 ]] || usage
    local action=$1 size=$2 i=$3 t0 deadline ndir
    check_size "$size"
    if ! [[ $i =~ ^[1-9][0-9]*$ ]] || ((i > $(nodes_of "$size"))); then
        log "node must be 1..$(nodes_of "$size"), got '$i'"
        usage
    fi
    case $action in
    stop)
        lock_cluster "$size"
        stop_nodes "$size" "$i"
        log "node $i of cluster $size stopped"
        ;;
    start)
        t0=$(now_ms)
        deadline=$((t0 + start_timeout * 1000))
        provision
        lock_cluster "$size"
        check_cluster_version "$size" "$i"
        ndir=$(node_dir "$size" "$i")
        if ! node_pid "$size" "$i" >/dev/null; then
            check_java
            if [[ $size == secured ]]; then make_tls; fi
            mkdir -p "$ndir"
            write_props "$size" "$i"
            format_nodes "$size" "$i" || exit 1
            launch_node "$size" "$i"
            started+=("$i")
        fi
        wait_ready "$size" "$deadline" nodes "$i"
        log "node $i of cluster $size is back in the metadata after $((($(now_ms) - t0) / 1000)) s"
        bootstrap_of "$size"
        ;;
    upgrade)
        # A rolling upgrade's step: node I, formatted by an older Kafka, stopped with SIGTERM
        # (a controlled shutdown) and started with KAFKA_VERSION's jars on the same data.
        # The cluster's finalized feature levels (metadata.version) stay until an operator
        # raises them (ci/kafka.sh tool features ... upgrade) once every node runs the new
        # version, as Kafka's upgrade notes ask.
        local was others j
        provision
        lock_cluster "$size"
        ndir=$(node_dir "$size" "$i")
        [[ -f $ndir/data/meta.properties ]] || die "node $i of cluster $size has no data to upgrade"
        was=$(node_version "$size" "$i")
        [[ -n $was ]] || die "node $i of cluster $size records no Kafka version"
        if [[ $was == "$kafka_version" ]]; then
            log "node $i of cluster $size already runs Kafka $kafka_version"
        else
            [[ $(printf '%s\n' "$was" "$kafka_version" | sort -V | tail -n 1) == "$kafka_version" ]] ||
                die "node $i of cluster $size runs Kafka $was: $kafka_version would be a downgrade"
            check_java
            t0=$(now_ms)
            deadline=$((t0 + start_timeout * 1000))
            stop_nodes "$size" "$i"
            log "upgrading node $i of cluster $size from Kafka $was to $kafka_version"
            echo "$kafka_version" >"$ndir/kafka.version"
            write_props "$size" "$i"
            launch_node "$size" "$i"
            started+=("$i")
            wait_ready "$size" "$deadline" nodes "$i"
            log "node $i of cluster $size runs Kafka $kafka_version, back in the metadata after $((($(now_ms) - t0) / 1000)) s"
        fi
        others=0
        for ((j = 1; j <= $(nodes_of "$size"); j++)); do
            [[ $(node_version "$size" "$j") == "$kafka_version" ]] || others=$((others + 1))
        done
        if ((others == 0)); then
            echo "$kafka_version" >"$(cluster_dir "$size")/kafka.version"
            for ((j = 1; j <= $(nodes_of "$size"); j++)); do rm -f "$(node_dir "$size" "$j")/kafka.version"; done
            log "every node of cluster $size runs Kafka $kafka_version; finalize the feature levels with ci/kafka.sh tool features"
        fi
        bootstrap_of "$size"
        ;;
    *) usage ;;
    esac
}

cmd_tool() {
    [[ $# -ge 1 ]] || usage
    local name=$1 main
    shift
    provision
    case $name in
    *.*) main=$name ;;
    *)
        if [[ -z $(tool_classes "$name") ]]; then
            log "unknown tool '$name'"
            usage
        fi
        find_tool "$name"
        main=$tool_main_class
        ;;
    esac
    check_java
    tool_java "$main" "$@"
}

[[ $# -ge 1 ]] || usage
command=$1
shift
case $command in
provision)
    [[ $# -eq 0 ]] || usage
    provision
    log "Apache Kafka $kafka_version is in ${libs_dir#"$repo_root"/}"
    ;;
start)
    [[ $# -le 1 ]] || usage
    cmd_start "$@"
    ;;
stop)
    [[ $# -le 1 ]] || usage
    cmd_stop "$@"
    ;;
clean)
    [[ $# -le 1 ]] || usage
    cmd_clean "$@"
    ;;
status)
    [[ $# -le 1 ]] || usage
    cmd_status "$@"
    ;;
bootstrap)
    [[ $# -le 1 ]] || usage
    check_size "${1:-1}"
    bootstrap_of "${1:-1}"
    ;;
jvm)
    [[ $# -eq 1 ]] || usage
    for size in 1 3 secured; do
        [[ $(bootstrap_of "$size") == "$1" ]] || continue
        if pid=$(node_pid "$size" 1); then
            printf 'local cluster %s, JVM %s\n' "$size" "$(jvm_of "$pid")"
        else
            printf 'local cluster %s, not running\n' "$size"
        fi
        exit 0
    done
    echo "not a local cluster of ci/kafka.sh"
    ;;
settings)
    [[ ($# -eq 1 || ($# -eq 2 && $2 == reauth)) && $1 == secured ]] || usage
    [[ -f $(tls_dir)/ready ]] || die "the secured cluster has no certificates yet: run ci/kafka.sh start secured"
    settings_bootstrap=$(bootstrap_of secured)
    if [[ ${2:-} == reauth ]]; then settings_bootstrap=localhost:$(reauth_port secured 1); fi
    printf '%s\n' "bootstrap.servers=$settings_bootstrap" security.protocol=SASL_SSL \
        sasl.mechanism=SCRAM-SHA-512 sasl.username=admin "sasl.password=$(secured_password admin)" \
        "ssl.ca.location=$(tls_dir)/ca.pem"
    ;;
node) cmd_node "$@" ;;
tool) cmd_tool "$@" ;;
help | -h | --help) usage 0 ;;
*)
    log "unknown command '$command'"
    usage
    ;;
esac
