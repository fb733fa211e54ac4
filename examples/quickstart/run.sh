#!/usr/bin/env bash
# The quickstart: one sandbox on the embedded process driver, a demo API on the host's loopback
# offered to it through operator host aliases, and eight things tried from inside the sandbox:
#   1. curl GET  http://api.demo.test/allowed          -> allowed (the upstream answers)
#   2. curl GET  https://api.demo.test/allowed         -> allowed: TLS intercepted with the sandbox's CA
#   3. curl POST https://api.demo.test/allowed         -> denied by an L7 deny rule (403 naming it)
#   4. curl to a host the policy does not name         -> denied (its name is never resolved)
#   5. bash opens api.demo.test itself                 -> denied (binary identity)
#   6. the credential placeholder to api.demo.test     -> the real value arrives upstream
#   7. the same placeholder to other.demo.test         -> refused 403 (not bound there)
#   8. an exec into the running sandbox: who it is, its DNS, its trust store
# Needs root (the process driver maps a private uid range per sandbox), a JDK 25 and curl.
# Everything it starts is stopped and deleted at the end, also when a step fails.
set -euo pipefail
started_at=$(date +%s)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
if [ "$(id -u)" -ne 0 ]; then
  echo "quickstart: run as root: the process driver maps a private uid range for each sandbox" >&2
  exit 2
fi
command -v curl >/dev/null || { echo "quickstart: needs curl (apt-get install curl)" >&2; exit 2; }
JAVA_HOME=$(.ci/find-jdk)
export JAVA_HOME
HTTP_PORT=18080
HTTPS_PORT=18443

work=$(mktemp -d /tmp/openshell-quickstart.XXXXXX)
chmod 0711 "$work"
echo "== building the CLI, the gateway and the two runtime images (first run: a few minutes)"
if ! ./mvnw -B -q -DskipTests -pl modules/openshell.cli,jlink/openshell-sandbox,jlink/openshell-supervisor -am package \
    >"$work/build.log" 2>&1; then
  cat "$work/build.log" >&2
  echo "quickstart: the build failed (output above)" >&2
  rm -rf "$work"
  exit 1
fi
touch modules/openshell.cli/target/openshell-built.stamp  # ./openshell need not build again
export OPENSHELL_HOME="$work/home"
export OPENSHELL_SUPERVISOR_LAUNCHER="$root/jlink/openshell-supervisor/target/openshell-supervisor/bin/openshell-supervisor"
export OPENSHELL_RUNTIME_LAUNCHER="$root/jlink/openshell-sandbox/target/openshell-sandbox/bin/openshell-sandbox"
upstream_pid=
failures=0
started=0  # once the CLI may have started something, cleanup asks it to stop and delete
cleanup() {
  if [ "$failures" -ne 0 ] && [ -d "$OPENSHELL_HOME" ]; then
    echo "== logs (kept for the failure above)" >&2
    find "$OPENSHELL_HOME" -name '*.log' -exec sh -c 'echo "--- $1"; tail -n 40 "$1"' _ {} \; >&2
  fi
  if [ "$started" -eq 1 ]; then
    ./openshell sandbox delete quickstart >/dev/null 2>&1 || true
    ./openshell provider delete demo >/dev/null 2>&1 || true
    ./openshell gateway stop >/dev/null 2>&1 || true
  fi
  [ -n "$upstream_pid" ] && kill "$upstream_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== making a demo CA and a certificate for api.demo.test and other.demo.test (keytool)"
pki="$work/pki"
mkdir -m 0700 "$pki"
# Demo keystores only: the password is random and goes through the environment, never argv.
QUICKSTART_STOREPASS=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
export QUICKSTART_STOREPASS
kt() { "$JAVA_HOME/bin/keytool" "$@" -storepass:env QUICKSTART_STOREPASS >/dev/null 2>&1; }
kt -genkeypair -keystore "$pki/ca.p12" -alias ca -keyalg EC -groupname secp256r1 \
   -dname "CN=OpenShell quickstart demo CA" -ext bc:c -validity 2
kt -genkeypair -keystore "$pki/server.p12" -alias server -keyalg EC -groupname secp256r1 -dname "CN=api.demo.test" -validity 2
kt -certreq -keystore "$pki/server.p12" -alias server -file "$pki/server.csr"
kt -gencert -keystore "$pki/ca.p12" -alias ca -infile "$pki/server.csr" -outfile "$pki/server.pem" -rfc -validity 2 \
   -ext san=dns:api.demo.test,dns:other.demo.test -ext eku=serverAuth
kt -exportcert -keystore "$pki/ca.p12" -alias ca -rfc -file "$pki/ca.pem"
kt -importcert -noprompt -keystore "$pki/server.p12" -alias ca -file "$pki/ca.pem"
kt -importcert -keystore "$pki/server.p12" -alias server -file "$pki/server.pem"

echo "== starting the demo upstream on the host's loopback (stands in for an API on the internet)"
"$JAVA_HOME/bin/java" examples/quickstart/Upstream.java "$HTTP_PORT" "$HTTPS_PORT" "$pki/server.p12" \
  >"$work/upstream.log" 2>&1 &
upstream_pid=$!
for _ in $(seq 1 150); do grep -q '^ready ' "$work/upstream.log" 2>/dev/null && break; sleep 0.2; done
grep -q '^ready ' "$work/upstream.log" || { echo "quickstart: the demo upstream did not start:" >&2; cat "$work/upstream.log" >&2; exit 1; }
echo "   http://127.0.0.1:$HTTP_PORT and https://127.0.0.1:$HTTPS_PORT (certificate from the demo CA)"

echo "== starting the gateway with two operator host aliases and the demo CA as an upstream trust anchor"
echo "   (trusted gateway configuration: a policy can name api.demo.test, but only the operator says where it is)"
started=1
./openshell gateway start --background --port 0 \
  --host-alias api.demo.test=127.0.0.1 --host-alias other.demo.test=127.0.0.1 --upstream-ca "$pki/ca.pem"

echo "== creating the credential provider 'demo', bound to api.demo.test only"
DEMO_SECRET="demo-secret-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export DEMO_SECRET
./openshell provider create demo --env DEMO_TOKEN --host api.demo.test --from-env DEMO_SECRET
echo "   (the real value, $DEMO_SECRET, stays with the gateway and the supervisor)"

mkdir -m 0777 "$work/workspace"
ws="$work/workspace"
echo "== creating the sandbox (the agent notes what DEMO_TOKEN it sees, then sleeps; we exec into it)"
failures=1  # until the sandbox runs: a failed create shows the logs
./openshell sandbox create --name quickstart --policy examples/quickstart/policy.yaml --workspace "$ws" \
  --provider demo -- /bin/bash -c "/usr/bin/printenv DEMO_TOKEN >$ws/agent-token; exec /bin/sleep 900"
failures=0
audit=$(find "$OPENSHELL_HOME" -name supervisor.log | head -n 1)
for _ in $(seq 1 50); do [ -s "$ws/agent-token" ] && break; sleep 0.2; done
placeholder=$(cat "$ws/agent-token")
echo "   the agent's environment holds DEMO_TOKEN=$placeholder (a placeholder, not the secret)"

# Prints the supervisor's audit lines written since $1 (line count), one decision per line.
decisions() {
  tail -n +"$(( $1 + 1 ))" "$audit" | grep '^{"time"' | grep -v '"kind":"dns","generation":[0-9]*,"decision":"allow"' |
    while IFS= read -r line; do
      kind=$(grep -o '"kind":"[^"]*"' <<<"$line" | head -n 1 | cut -d'"' -f4)
      decision=$(grep -o '"decision":"[^"]*"' <<<"$line" | head -n 1 | cut -d'"' -f4)
      binary=$(grep -o '"binary":{"path":"[^"]*"' <<<"$line" | head -n 1 | cut -d'"' -f6)
      reason=$(grep -o '"reason":"[^"]*"' <<<"$line" | head -n 1 | cut -d'"' -f4)
      echo "   why: supervisor audit: $kind ${decision:-?} for ${binary:-?}: $reason"
    done | uniq || true  # a step may make no decision at all (8)
}

step() { # title, expected exit (0 or nonzero), command...
  local title=$1 expect=$2; shift 2
  echo
  echo "== $title"
  echo "\$ $*"
  local before
  before=$(wc -l <"$audit")
  set +e
  ./openshell sandbox exec quickstart -- "$@" >"$work/step.out" 2>&1
  local rc=$?
  set -e
  cat "$work/step.out"
  [ -s "$work/step.out" ] && [ -n "$(tail -c 1 "$work/step.out")" ] && echo  # a 403 body has no final newline
  decisions "$before"
  if { [ "$expect" = 0 ] && [ $rc -eq 0 ]; } || { [ "$expect" != 0 ] && [ $rc -ne 0 ]; }; then
    echo "-> as expected (exit $rc)"
  else
    echo "-> UNEXPECTED (exit $rc)"; failures=$((failures + 1))
  fi
}
curl=(/usr/bin/curl -sS --max-time 30 --fail-with-body)
step "1. allowed: curl GET http://api.demo.test/allowed (the alias leads to the host's loopback)" 0 \
  "${curl[@]}" "http://api.demo.test:$HTTP_PORT/allowed"
step "2. allowed over HTTPS: curl trusts the sandbox's interception CA, which the runtime put in its trust store" 0 \
  "${curl[@]}" "https://api.demo.test:$HTTPS_PORT/allowed"
step "3. denied at L7 inside TLS: curl POST https://api.demo.test/allowed (a deny rule; 403 names it)" 1 \
  "${curl[@]}" -X POST "https://api.demo.test:$HTTPS_PORT/allowed"
step "4. denied host: curl https://example.com/ (no policy names it, so it is never even resolved)" 1 \
  "${curl[@]}" https://example.com/
step "5. denied binary: bash opens api.demo.test itself (the policy admits curl only)" 1 \
  /bin/bash -c "exec 3<>/dev/tcp/api.demo.test/$HTTP_PORT && echo connected"
step "6. credential: curl sends the placeholder to api.demo.test; the supervisor puts in the real value" 0 \
  /bin/bash -c "/usr/bin/curl -sS --max-time 30 --fail-with-body -H \"Authorization: Bearer \$(cat $ws/agent-token)\" https://api.demo.test:$HTTPS_PORT/echo"
step "7. credential misdirected: the same placeholder to other.demo.test is refused (not bound there)" 1 \
  /bin/bash -c "/usr/bin/curl -sS --max-time 30 --fail-with-body -H \"Authorization: Bearer \$(cat $ws/agent-token)\" https://other.demo.test:$HTTPS_PORT/echo"
step "8. exec into the running sandbox: who runs, which DNS, what was added to the trust store" 0 \
  /bin/bash -c "id; grep nameserver /etc/resolv.conf; grep '^# added by openshell-sandbox' /etc/ssl/certs/ca-certificates.crt; echo SSL_CERT_FILE=\$SSL_CERT_FILE"
step "9. filesystem_policy: a write to /tmp (read_write) succeeds; one to /var/tmp (in no list) is EACCES" 0 \
  /bin/bash -c "f=/tmp/openshell-quickstart.\$\$; echo ok >\$f && rm \$f && echo '/tmp: written' &&
    if (echo no >/var/tmp/openshell-quickstart.\$\$) 2>/dev/null; then echo '/var/tmp: WRITTEN (Landlock not enforced?)'; exit 1; else echo '/var/tmp: Permission denied'; fi"

echo
echo "== what the upstream saw (steps 3, 4, 5 and 7 never reached it; the secret arrived only in step 6)"
grep '^upstream saw' "$work/upstream.log" || true
if grep '^upstream saw' "$work/upstream.log" | grep -q "other.demo.test.*$DEMO_SECRET"; then
  echo "quickstart: the secret reached other.demo.test" >&2; failures=$((failures + 1))
fi
grep -q "api.demo.test:$HTTPS_PORT/echo with Authorization: Bearer $DEMO_SECRET" "$work/upstream.log" ||
  { echo "quickstart: the real value did not reach api.demo.test" >&2; failures=$((failures + 1)); }
if [ "$failures" -ne 0 ]; then
  echo "quickstart: $failures step(s) did not behave as expected" >&2
  exit 1
fi
echo
echo "quickstart: all nine behaved as the policy says ($(( $(date +%s) - started_at )) s)"
