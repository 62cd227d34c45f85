#!/usr/bin/env bash
# OpenShift's cluster-storage-operator, then ours, on one real API server: the takeover of
# issue #32, checked by hand. Needs the Go operator's binary (build it from
# openshift/cluster-storage-operator: `go build ./cmd/cluster-storage-operator`, with its
# vendored modules), a control plane from ../shared/k8s (`start.sh --kcm`), kubectl and python3
# with PyYAML (Debian: python3-yaml).
#
#   KUBECONFIG=$(../shared/k8s/start.sh --kcm) \
#   CSO_BIN=/path/to/cluster-storage-operator test/side-by-side/openshift-cso.sh
#
# It installs OpenShift's config CRDs (ours, field-identical; APIServer and ClusterVersion
# from OPENSHIFT_API_CRDS when set, a directory of openshift/api's generated Default CRDs),
# an AWS Infrastructure and the singletons OpenShift's operator waits for, runs OpenShift's
# operator until Storage/cluster has its conditions, stops it, then runs ours as the
# ServiceAccount of deploy/openshift (never as admin) and prints both condition lists, the
# managers of what each left, and our operator's warnings. Run it on a disposable cluster.
set -euo pipefail

: "${KUBECONFIG:?set KUBECONFIG to a disposable cluster (../shared/k8s/start.sh --kcm)}"
: "${CSO_BIN:?set CSO_BIN to the binary of OpenShift cluster-storage-operator}"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
version=0.0.1-snapshot

kubectl apply -f "$root/deploy/crds/" >/dev/null
if [[ -n "${OPENSHIFT_API_CRDS:-}" ]]; then
  kubectl apply -f "$OPENSHIFT_API_CRDS" >/dev/null
fi
for kind in apiservers clusterversions; do
  kubectl get crd "$kind.config.openshift.io" >/dev/null 2>&1 || {
    echo "error: the $kind.config.openshift.io CRD is missing: set OPENSHIFT_API_CRDS" >&2
    exit 1
  }
done

# The singletons of an OpenShift cluster on AWS, applied with their statuses after the
# install below.
k() { kubectl "$@"; }
# shellcheck source=openshift-cluster.sh
source "$(dirname "$0")/openshift-cluster.sh"

# deploy/openshift without the operator's Deployment (and its CredentialsRequest, whose kind
# only OpenShift serves): its namespaces, ServiceAccount, RBAC and policies.
python3 - "$root/deploy/openshift/storage-operator.yaml" > "$work/install.json" <<'PY'
import json, sys
import yaml
items = [d for d in yaml.safe_load_all(open(sys.argv[1]))
         if d and d["kind"] not in ("Deployment", "CredentialsRequest")]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
kubectl apply -f "$work/install.json" >/dev/null
openshift_cluster HighlyAvailable

cat > "$work/conditions.py" <<'PY'
import json, sys
status = json.load(sys.stdin).get("status", {})
for c in sorted(status.get("conditions", []), key=lambda c: c["type"]):
    print("  " + " ".join([c["type"], c["status"], c.get("reason", "")]))
PY
cat > "$work/managers.py" <<'PY'
import json, sys
for o in json.load(sys.stdin)["items"]:
    managers = sorted({e["manager"] for e in o["metadata"].get("managedFields", [])})
    print("  %s/%s: %s" % (o["kind"], o["metadata"]["name"], ", ".join(managers)))
PY
conditions() { kubectl get storage cluster -o json | python3 "$work/conditions.py"; }

echo "== OpenShift's operator" >&2
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$work/config.yaml" <<EOF
apiVersion: operator.openshift.io/v1alpha1
kind: GenericOperatorConfig
servingInfo: {bindAddress: "127.0.0.1:$port"}
EOF
# Its field manager is its binary's name, as on a cluster.
mkdir -p "$work/bin" && cp "$CSO_BIN" "$work/bin/cluster-storage-operator"
OPERATOR_IMAGE_VERSION=$version OPERAND_IMAGE_VERSION=$version \
  AWS_EBS_DRIVER_OPERATOR_IMAGE=quay.io/openshift/origin-aws-ebs-csi-driver-operator:latest \
  AWS_EBS_DRIVER_IMAGE=quay.io/openshift/origin-aws-ebs-csi-driver:latest \
  VOLUME_DATA_SOURCE_VALIDATOR_IMAGE=quay.io/openshift/origin-volume-data-source-validator:latest \
  POD_NAMESPACE=openshift-cluster-storage-operator POD_NAME=side-by-side \
  "$work/bin/cluster-storage-operator" start --kubeconfig="$KUBECONFIG" \
  --namespace=openshift-cluster-storage-operator --config="$work/config.yaml" -v=2 \
  >"$work/openshift.log" 2>&1 &
go_pid=$!
for _ in $(seq 60); do
  [[ $(kubectl get storage cluster -o jsonpath='{.status.conditions[*].type}' | wc -w) -ge 15 ]] && break
  sleep 2
done
sleep 10
kill "$go_pid" 2>/dev/null || {
  echo "error: OpenShift's operator stopped early; its log: $work/openshift.log" >&2
  exit 1
}
wait "$go_pid" 2>/dev/null || true
kubectl -n openshift-cluster-storage-operator delete lease cluster-storage-operator-lock --ignore-not-found >/dev/null
echo "Storage/cluster as OpenShift's operator left it:"; conditions

echo "== ours, as the ServiceAccount of deploy/openshift" >&2
token=$(kubectl -n openshift-cluster-storage-operator create token cluster-storage-operator --duration=1h)
server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$(kubectl config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
cat > "$work/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$server", certificate-authority-data: "$ca"}}]
users: [{name: u, user: {token: "$token"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
EOF
(cd "$root" && cargo build -q -p cli)
KUBECONFIG="$work/kubeconfig" "$root/target/debug/storage-operator" run \
  --operator-image localhost/storage-operator:side-by-side --operator-version "$version" \
  >"$work/ours.log" 2>&1 &
ours_pid=$!
sleep 40
kill "$ours_pid" 2>/dev/null || {
  echo "error: ours stopped early; its log: $work/ours.log" >&2
  exit 1
}
wait "$ours_pid" 2>/dev/null || true
echo "Storage/cluster once ours ran:"; conditions
echo "Who last wrote each object in the two namespaces:"
for ns in openshift-cluster-csi-drivers openshift-cluster-storage-operator; do
  kubectl get deploy,sa,cm,svc -n "$ns" --show-managed-fields -o json | python3 "$work/managers.py"
done
echo "Our warnings and errors:"
grep -E "WARN|ERROR" "$work/ours.log" | head -20 || echo "  none"
echo "(logs in $work)" >&2
