#!/usr/bin/env bash
# distributed-snapshotting.sh - starts the cluster's snapshot-controller (as ../shared/k8s/node.sh
# --snapshots installs it: Deployment kube-system/snapshot-controller, ClusterRole
# snapshot-controller-runner) with --enable-distributed-snapshotting, which the hostpath
# example's csi-snapshotter in the node pods (--node-deployment) needs: with it, the controller
# labels each VolumeSnapshotContent with the node of its volume
# (snapshot.storage.kubernetes.io/managed-by), the one label the node's snapshotter handles; it
# reads Nodes to find that node. Idempotent.
set -euo pipefail
ns=kube-system deploy=snapshot-controller role=snapshot-controller-runner
args=$(kubectl -n "$ns" get deployment "$deploy" -o jsonpath='{.spec.template.spec.containers[0].args}')
if [[ $args != *--enable-distributed-snapshotting* ]]; then
  kubectl -n "$ns" patch deployment "$deploy" --type json -p \
    '[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--enable-distributed-snapshotting"}]'
fi
if ! kubectl auth can-i list nodes --as "system:serviceaccount:$ns:$deploy" >/dev/null 2>&1; then
  kubectl patch clusterrole "$role" --type json -p \
    '[{"op": "add", "path": "/rules/-", "value": {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}}]'
fi
kubectl -n "$ns" rollout status deployment "$deploy" --timeout 120s
