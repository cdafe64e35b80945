#!/usr/bin/env bash
# The client-compatibility suites drive two external programs: kcat (librdkafka's console client) and the
# Java 17 toolchain (the Kafka Java client). Fail early with a clear message instead of skipping them.
set -euo pipefail

missing=0
if ! command -v kcat >/dev/null 2>&1; then
    echo "error: kcat not found. Install it: sudo apt-get install kcat   (macOS: brew install kcat)" >&2
    missing=1
fi
if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
    echo "error: java/javac not found. Install a JDK 17+: sudo apt-get install openjdk-17-jdk-headless" >&2
    missing=1
elif ! java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'; then
    echo "error: Java 17 or newer is needed (found: $(java -version 2>&1 | head -n1))" >&2
    missing=1
fi
if [ "$missing" -ne 0 ]; then
    exit 1
fi
echo "kcat: $(command -v kcat); java: $(java -version 2>&1 | head -n1)"
