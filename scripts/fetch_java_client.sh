#!/usr/bin/env bash
# Fetch the Apache Kafka Java client 3.9.1 (and the jars it needs for compression) for the Java
# compatibility tests. The jars ship inside a PyPI wheel, so plain `pip download` is enough: no Maven.
# Idempotent: does nothing when the jars are already extracted.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TIDELOG_CACHE_DIR:-$ROOT/.cache}"
JAVA_DIR="$CACHE/java"
WHEEL_SPEC="shigawire-apache-flink-libraries==2.0.0.post1"
WHEEL_GLOB="shigawire_apache_flink_libraries-2.0.0.post1-*.whl"
# jackson: the OAUTHBEARER unsecured login module parses its token with Jackson (OAuthBearerUnsecuredJws).
JARS=(kafka-clients.jar slf4j-api.jar lz4-java.jar snappy-java.jar zstd-jni.jar
      jackson-core.jar jackson-databind.jar jackson-annotations.jar)
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3

have_all() {
    for jar in "${JARS[@]}"; do [ -s "$JAVA_DIR/$jar" ] || return 1; done
}

if have_all; then
    echo "Java client jars present in $JAVA_DIR"
    exit 0
fi

mkdir -p "$CACHE" "$JAVA_DIR"
# shellcheck disable=SC2086
wheel=$(ls "$CACHE"/$WHEEL_GLOB 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
    echo "Downloading $WHEEL_SPEC (about 90 MB) into $CACHE ..."
    "$PYTHON" -m pip download --no-deps --only-binary=:all: --dest "$CACHE" "$WHEEL_SPEC"
    wheel=$(ls "$CACHE"/$WHEEL_GLOB | head -n1)
fi

# Extract only the five jars (a wheel is a zip file; Python's zipfile avoids needing `unzip`).
"$PYTHON" - "$wheel" "$JAVA_DIR" "${JARS[@]}" <<'PY'
import os
import sys
import zipfile

wheel, dest, *jars = sys.argv[1:]
with zipfile.ZipFile(wheel) as zf:
    for jar in jars:
        member = f"pyflink/lib/{jar}"
        tmp = os.path.join(dest, jar + ".part")
        with zf.open(member) as src, open(tmp, "wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
        os.replace(tmp, os.path.join(dest, jar))
PY

have_all
echo "Java client jars extracted to $JAVA_DIR"
