#!/usr/bin/env bash
# The full sandbox benchmark of issue 9, one command:
#   sudo tests/perf/sandbox/run.sh [--only tcp-connect,tcp-rr,tcp-stream,dns,lifecycle,scale,soak,decision]
# Builds the CLI, the gateway, the two runtime images and osperf; measures policy decisions per
# second (tests/policy's DecisionThroughput, 20 s per mix); then runs every scenario and writes
#   tests/perf/sandbox/target/perf-sandbox-full.json   (one record per scenario)
#   tests/perf/RESULTS.md                              (the Markdown table, with date and revision)
# Needs root (the process driver maps a private uid range per sandbox), gcc and a JDK 25. Takes
# 15-40 minutes depending on the machine's load. Everything it starts is stopped at the end.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
cd "$root"
if [ "$(id -u)" -ne 0 ]; then
  echo "run.sh: run as root: the process driver maps a private uid range for each sandbox" >&2
  exit 2
fi
command -v gcc >/dev/null || { echo "run.sh: needs gcc (apt-get install gcc libc6-dev)" >&2; exit 2; }
JAVA_HOME=$(.ci/find-jdk)
export JAVA_HOME

echo "== building the CLI, the gateway, the runtime images and osperf"
./mvnw -B -q -DskipTests \
  -pl modules/openshell.cli,jlink/openshell-sandbox,jlink/openshell-supervisor,tests/perf/sandbox -am package
decision=tests/policy/target/bench/policy-decisions.json
if [ "${1:-}" != "--only" ] || [[ "${2:-}" == *decision* ]]; then
  echo "== policy decisions per second (tests/policy DecisionThroughput, 20 s per mix)"
  ./mvnw -B -q -pl tests/policy -am verify -Dtest=DecisionThroughputTest \
    -Dsurefire.failIfNoSpecifiedTests=false -Dopenshell.policy.bench.seconds=20 >/dev/null
fi
echo "== the sandbox benchmark"
# Loopback only: the harness, its server, resolver, gateways and sandboxes run in a network namespace
# whose only interface is lo (the conformance kit's wrapper); nothing reaches another machine.
export OPENSHELL_REAL_JAVA="$JAVA_HOME/bin/java"
exec modules/openshell.isolation.conformance/loopback-only/bin/java \
  -cp tests/perf/sandbox/target/classes:tests/support/target/classes:modules/openshell.isolation/target/classes openshell.perf.sandbox.SandboxBenchmark \
  --mode full "$@" \
  --osperf tests/perf/sandbox/target/osperf \
  --cli-lib modules/openshell.cli/target/lib \
  --cli-jar modules/openshell.cli/target/openshell-cli-0.1.0-SNAPSHOT.jar \
  --supervisor-launcher jlink/openshell-supervisor/target/openshell-supervisor/bin/openshell-supervisor \
  --runtime-launcher jlink/openshell-sandbox/target/openshell-sandbox/bin/openshell-sandbox \
  --decision-json "$decision" \
  --out tests/perf/sandbox/target/perf-sandbox-full.json \
  --results-md tests/perf/RESULTS.md
