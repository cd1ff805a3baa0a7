#!/usr/bin/env bash
# Sourced by ci/uniffi.sh and ci/release.sh / ci/release-check.sh: the Kotlin
# compiler, kotlin-stdlib, kotlinx-coroutines and JNA from Maven Central into
# ci/.cache/uniffi-jars (gitignored), each checked against the sha256 pinned
# here; downloaded only when missing, and a failed download (offline) stops
# the caller with the URL. After `uniffi_jars`: COMPILER_CP (kotlinc's
# classpath), RUN_CP (what the bindings need at run time: kotlin-stdlib,
# kotlinx-coroutines, JNA), OPT_CP (the optional dependencies, which only
# their own classes use: Micrometer for krabka.coordination.micrometer, with
# what it needs to run), JAR_COUNT. After `uniffi_test_jars`: TEST_CP (JUnit
# 5, for ci/uniffi.sh's tests only).
# Needs ROOT (the repository).
JARS="$ROOT/ci/.cache/uniffi-jars"
MAVEN="${KRABKA_MAVEN_URL:-https://repo1.maven.org/maven2}"

# group:artifact:version sha256. The compiler's own dependencies are the ones
# its POM lists (kotlin-reflect at the version it names).
JAR_LIST="
org.jetbrains.kotlin:kotlin-compiler-embeddable:2.4.21 ef19419c765e7ac8404465fa026ca8fc4dbb8a822de0fc79aa53c8dce29f1d02
org.jetbrains.kotlin:kotlin-stdlib:2.4.21 bd8250210584cb659847dce9cda660f8e9906e5def7fbebcea93dc6dcb6a88a3
org.jetbrains.kotlin:kotlin-script-runtime:2.4.21 a658cf5902a1525a06c264a5e42b437e97a6679ddeef8ca641246f270cf6a013
org.jetbrains.kotlin:kotlin-reflect:1.6.10 3277ac102ae17aad10a55abec75ff5696c8d109790396434b496e75087854203
org.jetbrains.kotlin:kotlin-daemon-embeddable:2.4.21 7b3ef24674e5bcffcadfc4e43202ea314194939ecbcdd90a4770b2f1b04e0d07
org.jetbrains.kotlin:kotlin-build-tools-api:2.4.21 c5cd6a49bd072b529ae10809111c16a7aa0f92147e95d288354017fd65799461
org.jetbrains.kotlinx:kotlinx-coroutines-core-jvm:1.11.0 d1d75aa01dffbb4d1c520e67e4c4e7f5f6174718e7cb4632412503f2f0e604fa
org.jetbrains:annotations:23.0.0 7b0f19724082cbfcbc66e5abea2b9bc92cf08a1ea11e191933ed43801eb3cd05
net.java.dev.jna:jna:5.19.1 4fb141dd8ef6b0585ffceea4bc49602fbc6312fa977e2c488794ea3e6aafecae
"

# The optional dependencies (OPT_CP): micrometer-core first (ci/release.sh
# names it in the POM as optional), then what it needs at compile and run
# time (its POM's compile and runtime dependencies that are not optional).
OPT_LIST="
io.micrometer:micrometer-core:1.17.2 e28ddecbd27477cc7020defd1c2061a3d8b6b2e543d90856186711fe7f346532
io.micrometer:micrometer-commons:1.17.2 af8c85e879025ce30c381e6810e14c4f52b4150894e36c815860d14763271348
io.micrometer:micrometer-observation:1.17.2 d3ff53cfa0532dc1af0de349073f9aeb985e01f4b88c1d904350178805859695
org.jspecify:jspecify:1.0.1 070d75f261fe4c5b8202508366715f7f2d4660f88c8ef7e6d3575e48c9683b66
org.hdrhistogram:HdrHistogram:2.2.2 22d1d4316c4ec13a68b559e98c8256d69071593731da96136640f864fa14fad8
"

# The JDBC drivers the fence's tests run with (bindings/uniffi/tests/kotlin/
# Fence.kt, tests/java/.../JavaFence.java): krabka.coordination.jdbc needs
# none to compile, and an application brings its own, so the release neither
# bundles nor names them. Only ci/uniffi.sh fetches them (uniffi_db_jars).
DB_LIST="
org.postgresql:postgresql:42.7.14 73914527305a40cce504b0d3d90b23caf565136912d607ae8ae7c5895512332c
org.xerial:sqlite-jdbc:3.54.1.0 f8dce420a6016278497f4f0560f65602b9db858de141b541cf91a4644ebe4639
"

# The test-only jars (TEST_CP, ci/uniffi.sh alone): JUnit 5's console
# launcher, one jar holding the Jupiter API and engine and the platform, for
# the test-kit tests written as JUnit 5 tests (as a user's would be).
TEST_LIST="
org.junit.platform:junit-platform-console-standalone:1.14.4 7c6968cbcaf4301c729f202b23b7d736c5d88be625fc7d27ad5d746146a8bc28
"

# The path of a jar of JAR_LIST, fetched and verified when missing.
uniffi_jar() {
    local spec="$1" sha="$2" g a v
    IFS=: read -r g a v <<<"$spec"
    local file="$JARS/$a-$v.jar"
    if [ ! -f "$file" ]; then
        local url="$MAVEN/${g//.//}/$a/$v/$a-$v.jar"
        mkdir -p "$JARS"
        if ! curl -fsSL --retry 2 -o "$file.part" "$url"; then
            rm -f "$file.part"
            echo "ci/uniffi-jars.sh: cannot download $url (offline?); the Kotlin build needs it" >&2
            exit 1
        fi
        mv "$file.part" "$file"
    fi
    if [ "$(sha256sum "$file" | cut -c1-64)" != "$sha" ]; then
        echo "ci/uniffi-jars.sh: $file does not have the pinned sha256 $sha; removed" >&2
        rm -f "$file"
        exit 1
    fi
    echo "$file"
}

# Fetches and verifies every jar; sets COMPILER_CP, RUN_CP and JAR_COUNT.
uniffi_jars() {
    local spec sha path
    COMPILER_CP=""
    while read -r spec sha; do
        [ -n "$spec" ] || continue
        path="$(uniffi_jar "$spec" "$sha")"
        COMPILER_CP="$COMPILER_CP${COMPILER_CP:+:}$path"
        case "$spec" in
            *:kotlin-stdlib:*) STDLIB="$path" ;;
            *:kotlinx-coroutines-core-jvm:*) COROUTINES="$path" ;;
            *:jna:*) JNA="$path" ;;
        esac
    done <<<"$JAR_LIST"
    RUN_CP="$STDLIB:$COROUTINES:$JNA"
    OPT_CP="$(uniffi_classpath "$OPT_LIST")"
    JAR_COUNT="$(echo "$JAR_LIST$OPT_LIST" | grep -c .)"
}

# The classpath of the jars of a list ($1: "group:artifact:version sha256"
# lines), each fetched and verified.
uniffi_classpath() {
    local spec sha path cp=""
    while read -r spec sha; do
        [ -n "$spec" ] || continue
        path="$(uniffi_jar "$spec" "$sha")" || return 1
        cp="$cp${cp:+:}$path"
    done <<<"$1"
    echo "$cp"
}

# Fetches and verifies the JDBC drivers of DB_LIST; sets DB_CP.
uniffi_db_jars() {
    DB_CP="$(uniffi_classpath "$DB_LIST")"
}

# Fetches and verifies the test-only jars; sets TEST_CP.
uniffi_test_jars() {
    TEST_CP="$(uniffi_classpath "$TEST_LIST")"
}
