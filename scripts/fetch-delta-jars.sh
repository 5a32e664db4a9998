#!/usr/bin/env bash
# Fetch Delta Spark's jars from Maven Central into .cache/jars (git-ignored), once.
# Used by tests that take Delta Spark as the reference oracle; pass the files to
# Spark with spark.jars. Needs Maven (mvn) and network on the first run only.
set -euo pipefail
cd "$(dirname "$0")/.."
DELTA_VERSION=${DELTA_VERSION:-4.4.0}  # 4.4.1 jars are not on Maven Central (checked 2026-11-22)
SCALA_SPARK=${SCALA_SPARK:-4.2_2.13}
out=.cache/jars
mkdir -p "$out"
for artifact in "io.delta:delta-spark_${SCALA_SPARK}:${DELTA_VERSION}" "io.delta:delta-storage:${DELTA_VERSION}"; do
    name=$(echo "$artifact" | awk -F: '{print $2 "-" $3 ".jar"}')
    if [ ! -s "$out/$name" ]; then
        echo "fetch-delta-jars: $artifact"
        mvn -q -B -U dependency:copy -Dartifact="$artifact" -DoutputDirectory="$out" -Dmdep.overWriteIfNewer=true
    fi
done
ls "$out"/*.jar
