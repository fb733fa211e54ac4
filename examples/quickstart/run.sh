#!/usr/bin/env bash
# The quickstart: one sandbox on the embedded process driver, four requests from inside it.
#   1. curl GET /allowed on the demo upstream      -> allowed (200, the upstream answers)
#   2. curl to a host the policy does not declare  -> denied (its name is never resolved)
#   3. the same upstream from bash, not curl       -> denied (binary identity: EACCES at connect)
#   4. curl POST /allowed                          -> denied at L7 (403 from the supervisor)
# Needs root (the process driver maps a private uid range per sandbox), a JDK 25 and curl.
# Everything it starts is stopped and deleted at the end, also when a step fails.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
if [ "$(id -u)" -ne 0 ]; then
  echo "quickstart: run as root: the process driver maps a private uid range for each sandbox" >&2
  exit 2
fi
command -v curl >/dev/null || { echo "quickstart: needs curl (apt-get install curl)" >&2; exit 2; }
JAVA_HOME=$(.ci/find-jdk)
export JAVA_HOME

echo "== building the CLI, the gateway and the two runtime images (first run: a few minutes)"
./mvnw -B -q -DskipTests -pl modules/openshell.cli,jlink/openshell-sandbox,jlink/openshell-supervisor -am package
touch modules/openshell.cli/target/openshell-built.stamp  # ./openshell need not build again

work=$(mktemp -d /tmp/openshell-quickstart.XXXXXX)
chmod 0711 "$work"
export OPENSHELL_HOME="$work/home"
export OPENSHELL_SUPERVISOR_LAUNCHER="$root/jlink/openshell-supervisor/target/openshell-supervisor/bin/openshell-supervisor"
export OPENSHELL_RUNTIME_LAUNCHER="$root/jlink/openshell-sandbox/target/openshell-sandbox/bin/openshell-sandbox"
upstream_pid=
failures=0
cleanup() {
  if [ "$failures" -ne 0 ] && [ -d "$OPENSHELL_HOME" ]; then
    echo "== logs (kept for the failure above)" >&2
    find "$OPENSHELL_HOME" -name '*.log' -exec sh -c 'echo "--- $1"; tail -n 40 "$1"' _ {} \; >&2
  fi
  ./openshell sandbox delete quickstart >/dev/null 2>&1 || true
  ./openshell gateway stop >/dev/null 2>&1 || true
  [ -n "$upstream_pid" ] && kill "$upstream_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== starting the demo upstream (stands in for an API on the internet)"
"$JAVA_HOME/bin/java" examples/quickstart/Upstream.java auto 18080 >"$work/upstream.log" 2>&1 &
upstream_pid=$!
for _ in $(seq 1 100); do grep -q '^ready ' "$work/upstream.log" 2>/dev/null && break; sleep 0.2; done
address=$(sed -n 's/^ready \(.*\):.*/\1/p' "$work/upstream.log")
[ -n "$address" ] || { echo "quickstart: the demo upstream did not start:" >&2; cat "$work/upstream.log" >&2; exit 1; }
sed "s/api\.quickstart\.test/$address/" examples/quickstart/policy.yaml >"$work/policy.yaml"
echo "   upstream on $address:18080; policy: curl may GET http://$address:18080/allowed"

echo "== starting the gateway"
./openshell gateway start --background --port 0
mkdir -m 0777 "$work/workspace"
echo "== creating the sandbox (the agent: sleep; we exec into it)"
failures=1  # until the sandbox runs: a failed create shows the logs
./openshell sandbox create --name quickstart --policy "$work/policy.yaml" --workspace "$work/workspace" -- /bin/sleep 600
failures=0

step() { # title, expected exit (0 or nonzero), command...
  local title=$1 expect=$2; shift 2
  echo
  echo "== $title"
  echo "\$ $*"
  set +e
  ./openshell sandbox exec quickstart -- "$@"
  local rc=$?
  set -e
  if { [ "$expect" = 0 ] && [ $rc -eq 0 ]; } || { [ "$expect" != 0 ] && [ $rc -ne 0 ]; }; then
    echo "-> as expected (exit $rc)"
  else
    echo "-> UNEXPECTED (exit $rc)"; failures=$((failures + 1))
  fi
}
step "1. allowed: curl GET /allowed" 0 \
  /usr/bin/curl -sS --fail-with-body "http://$address:18080/allowed"
step "2. denied host: curl to a host the policy does not name" 1 \
  /usr/bin/curl -sS --max-time 20 http://example.com/
step "3. denied binary: bash opens the allowed upstream itself" 1 \
  /usr/bin/bash -c "exec 3<>/dev/tcp/$address/18080 && echo connected"
step "4. denied L7 request: curl POST /allowed" 1 \
  /usr/bin/curl -sS --fail-with-body -X POST "http://$address:18080/allowed"

echo
echo "== what the upstream saw (requests 2-4 never reached it)"
grep '^upstream saw' "$work/upstream.log" || true
if [ "$failures" -ne 0 ]; then
  echo "quickstart: $failures step(s) did not behave as expected" >&2
  exit 1
fi
echo
echo "quickstart: all four behaved as the policy says"
