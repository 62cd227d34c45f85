# Sourced by the side-by-side scripts: the singletons an OpenShift cluster has, on the cluster
# the function `k` (a kubectl with its kubeconfig) reaches, with the statuses OpenShift's
# operators would have written, for an AWS cluster whose control plane topology is $1
# (HighlyAvailable, or External for a hosted cluster) and whose release is $version.
openshift_cluster() {
  local topology=$1
  k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: openshift-config}
---
apiVersion: v1
kind: Namespace
metadata: {name: openshift-config-managed}
---
apiVersion: config.openshift.io/v1
kind: Infrastructure
metadata: {name: cluster}
spec: {platformSpec: {type: AWS}}
---
apiVersion: config.openshift.io/v1
kind: Proxy
metadata: {name: cluster}
spec: {}
---
apiVersion: config.openshift.io/v1
kind: APIServer
metadata: {name: cluster}
spec: {}
---
apiVersion: config.openshift.io/v1
kind: FeatureGate
metadata: {name: cluster}
spec: {}
---
apiVersion: config.openshift.io/v1
kind: ClusterVersion
metadata: {name: version}
spec: {clusterID: 11111111-2222-3333-4444-555555555555}
---
apiVersion: operator.openshift.io/v1
kind: Storage
metadata: {name: cluster}
spec: {managementState: Managed, logLevel: Normal, operatorLogLevel: Normal}
---
apiVersion: config.openshift.io/v1
kind: ClusterOperator
metadata: {name: storage}
spec: {}
YAML
  status() { k patch "$1" "$2" --subresource=status --type=merge -p "$3" >/dev/null; }
  status infrastructure cluster "{\"status\":{\"platform\":\"AWS\",\"platformStatus\":{\"type\":\"AWS\",\"aws\":{\"region\":\"us-east-1\"}},\"infrastructureName\":\"side-by-side\",\"controlPlaneTopology\":\"$topology\",\"infrastructureTopology\":\"HighlyAvailable\",\"apiServerURL\":\"https://api.x:6443\",\"apiServerInternalURI\":\"https://api-int.x:6443\",\"etcdDiscoveryDomain\":\"\"}}"
  status featuregate cluster "{\"status\":{\"featureGates\":[{\"version\":\"$version\",\"enabled\":[],\"disabled\":[{\"name\":\"SELinuxMountGAReadiness\"},{\"name\":\"Example\"}]}]}}"
  status clusterversion version "{\"status\":{\"desired\":{\"version\":\"$version\",\"image\":\"x\"},\"history\":[{\"state\":\"Completed\",\"version\":\"$version\",\"image\":\"x\",\"startedTime\":\"2026-01-01T00:00:00Z\",\"completionTime\":\"2026-01-01T00:01:00Z\",\"verified\":false}],\"observedGeneration\":1,\"versionHash\":\"x\",\"availableUpdates\":[]}}"
  status clusteroperator storage "{\"status\":{\"versions\":[{\"name\":\"operator\",\"version\":\"$version\"}]}}"
}
