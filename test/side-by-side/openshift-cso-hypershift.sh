#!/usr/bin/env bash
# A cluster storage operator in HyperShift mode (--guest-kubeconfig) on a fresh pair of real API
# servers, a management cluster and a guest, with the inputs a hosted cluster on AWS has; then
# what it wrote on each side and the condition types of the guest's Storage, as JSON on stdout.
# Run it once with OpenShift's operator and once with ours, each on its own fresh pair, and
# compare (issue #34: each object on the same side, each condition type there):
#
#   M=$(../shared/k8s/start.sh --kcm); G=$(../shared/k8s/start.sh --kcm)
#   WHO=openshift CSO_BIN=/path/to/cluster-storage-operator OPENSHIFT_API_CRDS=/dir \
#     MGMT_KUBECONFIG=$M GUEST_KUBECONFIG=$G test/side-by-side/openshift-cso-hypershift.sh > openshift.json
#   (two fresh ones again)
#   WHO=ours ... test/side-by-side/openshift-cso-hypershift.sh > ours.json
#
# CSO_BIN is OpenShift's binary (`go build ./cmd/cluster-storage-operator` in
# openshift/cluster-storage-operator, with its vendored modules); OPENSHIFT_API_CRDS a directory
# with openshift/api's generated Default CRDs of APIServer and ClusterVersion. Needs kubectl and
# python3 with PyYAML. What HyperShift would have made is made first: the control-plane
# namespace, its PriorityClass, a HostedControlPlane (open-schema CRD) and the guest kubeconfig
# Secret on the management cluster; the guest's Infrastructure (AWS, External topology). Ours
# runs as its own identities: the ServiceAccount of its management-side install
# (`manifests --hosted-control-plane-namespace`) and, in the guest, that of deploy/openshift.
set -euo pipefail

: "${WHO:?set WHO to openshift or ours}"
: "${MGMT_KUBECONFIG:?set MGMT_KUBECONFIG to a fresh management cluster (../shared/k8s/start.sh --kcm)}"
: "${GUEST_KUBECONFIG:?set GUEST_KUBECONFIG to a fresh guest cluster (../shared/k8s/start.sh --kcm)}"
: "${OPENSHIFT_API_CRDS:?set OPENSHIFT_API_CRDS to a directory with the APIServer and ClusterVersion CRDs}"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
version=0.0.1-snapshot
cp=clusters-side-by-side
mgmt() { kubectl --kubeconfig "$MGMT_KUBECONFIG" "$@"; }
guest() { kubectl --kubeconfig "$GUEST_KUBECONFIG" "$@"; }

# The guest: OpenShift's config and operator APIs, the singletons a cluster has, and the
# release payload's namespaces of the storage operators (applied by the cluster version
# operator in a hosted cluster too).
guest apply -f "$root/deploy/crds/" >/dev/null
guest apply -f "$OPENSHIFT_API_CRDS" >/dev/null
guest wait --for=condition=Established crd --all --timeout=60s >/dev/null
guest apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: openshift-cluster-storage-operator}
---
apiVersion: v1
kind: Namespace
metadata: {name: openshift-cluster-csi-drivers}
EOF
k() { guest "$@"; }
# shellcheck source=openshift-cluster.sh
source "$(dirname "$0")/openshift-cluster.sh"
openshift_cluster External

# The management cluster: what HyperShift makes for a hosted cluster.
mgmt apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $cp}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: hypershift-control-plane}
value: 100000000
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: hostedcontrolplanes.hypershift.openshift.io}
spec:
  group: hypershift.openshift.io
  scope: Namespaced
  names: {kind: HostedControlPlane, plural: hostedcontrolplanes, singular: hostedcontrolplane, listKind: HostedControlPlaneList}
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
EOF
mgmt wait --for=condition=Established crd/hostedcontrolplanes.hypershift.openshift.io --timeout=60s >/dev/null
mgmt apply -f - >/dev/null <<EOF
apiVersion: hypershift.openshift.io/v1beta1
kind: HostedControlPlane
metadata: {name: side-by-side, namespace: $cp}
spec: {platform: {type: AWS}}
EOF
mgmt -n "$cp" create secret generic service-network-admin-kubeconfig \
  --from-file=kubeconfig="$GUEST_KUBECONFIG" >/dev/null

images=(
  AWS_EBS_DRIVER_OPERATOR_IMAGE=quay.io/openshift/origin-aws-ebs-csi-driver-operator:latest
  AWS_EBS_DRIVER_IMAGE=quay.io/openshift/origin-aws-ebs-csi-driver:latest
  VOLUME_DATA_SOURCE_VALIDATOR_IMAGE=quay.io/openshift/origin-volume-data-source-validator:latest
  HYPERSHIFT_IMAGE=quay.io/hypershift/hypershift:latest
  OPERATOR_IMAGE_VERSION=$version OPERAND_IMAGE_VERSION=$version
  RELEASE_VERSION=$version
  POD_NAMESPACE=$cp POD_NAME=side-by-side
)
case "$WHO" in
  openshift)
    : "${CSO_BIN:?set CSO_BIN to the binary of OpenShift cluster-storage-operator}"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat > "$work/config.yaml" <<EOF
apiVersion: operator.openshift.io/v1alpha1
kind: GenericOperatorConfig
servingInfo: {bindAddress: "127.0.0.1:$port"}
EOF
    # Its field manager is its binary's name, as on a cluster.
    mkdir -p "$work/bin" && cp "$CSO_BIN" "$work/bin/cluster-storage-operator"
    env "${images[@]}" "$work/bin/cluster-storage-operator" start \
      --kubeconfig="$MGMT_KUBECONFIG" --guest-kubeconfig="$GUEST_KUBECONFIG" \
      --namespace="$cp" --config="$work/config.yaml" -v=2 >"$work/operator.log" 2>&1 &
    manager='^cluster-storage-operator$'
    ;;
  ours)
    # Its identities: the management-side install, and deploy/openshift in the guest.
    (cd "$root" && cargo build -q -p cli)
    bin=$root/target/debug/storage-operator
    "$bin" manifests --hosted-control-plane-namespace "$cp" \
      | python3 -c 'import sys, yaml, json; print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [d for d in yaml.safe_load_all(sys.stdin) if d and d["kind"] != "Deployment"]}))' \
      | mgmt apply -f - >/dev/null
    python3 - "$root/deploy/openshift/storage-operator.yaml" > "$work/install.json" <<'PY'
import json, sys
import yaml
items = [d for d in yaml.safe_load_all(open(sys.argv[1]))
         if d and d["kind"] not in ("Deployment", "CredentialsRequest")]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
    guest apply -f "$work/install.json" >/dev/null
    kubeconfig_for() { # $1: the admin kubeconfig, $2: namespace, $3: ServiceAccount
      local token server ca
      token=$(kubectl --kubeconfig "$1" -n "$2" create token "$3" --duration=1h)
      server=$(kubectl --kubeconfig "$1" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
      ca=$(kubectl --kubeconfig "$1" config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
      printf 'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "%s", certificate-authority-data: "%s"}}]\nusers: [{name: u, user: {token: "%s"}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n' "$server" "$ca" "$token"
    }
    kubeconfig_for "$MGMT_KUBECONFIG" "$cp" cluster-storage-operator > "$work/mgmt.kubeconfig"
    kubeconfig_for "$GUEST_KUBECONFIG" openshift-cluster-storage-operator cluster-storage-operator > "$work/guest.kubeconfig"
    env "${images[@]}" KUBECONFIG="$work/mgmt.kubeconfig" "$bin" run \
      --guest-kubeconfig "$work/guest.kubeconfig" --admin-address 127.0.0.1:0 \
      --operator-image localhost/storage-operator:side-by-side --operator-version "$version" \
      >"$work/operator.log" 2>&1 &
    manager='^storage-operator(/|$)'
    ;;
  *) echo "error: WHO is $WHO; set it to openshift or ours" >&2; exit 1 ;;
esac
pid=$!
for _ in $(seq 60); do
  [[ $(guest get storage cluster -o jsonpath='{.status.conditions[*].type}' | wc -w) -ge 15 ]] && break
  sleep 2
done
sleep 20
kill "$pid" 2>/dev/null || {
  echo "error: the operator stopped early; its log: $work/operator.log" >&2
  exit 1
}
wait "$pid" 2>/dev/null || true

# What it wrote: every object of each cluster with a field manager of its.
written() { # $1: side, $2: kubeconfig
  local kinds
  kinds=$(kubectl --kubeconfig "$2" api-resources --verbs=list -o name | grep -v '^events' | paste -sd, -)
  kubectl --kubeconfig "$2" get "$kinds" -A --show-managed-fields -o json 2>/dev/null \
    | python3 -c '
import json, re, sys
side, manager = sys.argv[1], re.compile(sys.argv[2])
for o in json.load(sys.stdin)["items"]:
    if any(manager.search(e.get("manager", "")) for e in o["metadata"].get("managedFields", [])):
        print(json.dumps({"cluster": side, "kind": o["kind"],
                          "namespace": o["metadata"].get("namespace", ""), "name": o["metadata"]["name"]}))
' "$1" "$manager"
}
{
  written management "$MGMT_KUBECONFIG"
  written guest "$GUEST_KUBECONFIG"
} > "$work/written.jsonl"
guest get storage cluster -o json > "$work/storage.json"
python3 - "$work/written.jsonl" "$work/storage.json" "$WHO" <<'PY'
import json, sys
written = sorted((json.loads(l) for l in open(sys.argv[1]) if l.strip()),
                 key=lambda o: (o["cluster"], o["kind"], o["namespace"], o["name"]))
status = json.load(open(sys.argv[2])).get("status", {})
conditions = sorted(c["type"] + " " + c["status"] + " " + c.get("reason", "")
                    for c in status.get("conditions", []))
print(json.dumps({"operator": sys.argv[3], "written": written, "storageConditions": conditions},
                 indent=1))
PY
echo "(logs in $work)" >&2
