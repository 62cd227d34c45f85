//! The parts of the Infrastructure schema that our Rust types do not carry: the platforms and
//! fields we keep in `extra` maps (vSphere failure domains, Nutanix Prism endpoints, load
//! balancer settings, ...) and the limits of modelled fields that differ by platform (the tags
//! of AWS, Azure and GCP share one Rust type but not their rules). [`declared`] is laid over the
//! schema generated from the types (see `crds::infrastructure`), so that our CRD declares
//! exactly what openshift/api's Default feature set declares and the API server prunes what it
//! does not.

use serde_json::{Map, Value, json};

/// One CEL rule with its message.
fn rule(rule: &str, message: &str) -> Value {
    json!({"rule": rule, "message": message})
}

fn string() -> Value {
    json!({"type": "string"})
}

/// An object with no declared fields: the platform has no settings yet.
fn empty_object(description: &str) -> Value {
    json!({"type": "object", "description": description})
}

/// Adds `value` under `key` to a JSON object.
fn with(mut node: Value, key: &str, value: Value) -> Value {
    if let Some(map) = node.as_object_mut() {
        map.insert(key.into(), value);
    }
    node
}

/// Merges `patch` into `target`: objects field by field, anything else replaced.
pub fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

/// An immutable-once-set string: it may go from empty to a value, never change after.
const SET_ONCE: &str = "oldSelf == '' || self == oldSelf";

// ---------------------------------------------------------------------------------------------
// Addresses

/// A user-given list of at most two IP addresses, one per family (spec side).
fn spec_ips(description: &str) -> Value {
    json!({
        "type": "array",
        "description": description,
        "maxItems": 2,
        "x-kubernetes-list-type": "atomic",
        "items": {
            "type": "string",
            "minLength": 1,
            "maxLength": 39,
            "x-kubernetes-validations": [rule("isIP(self)", "must be an IP address")],
        },
        "x-kubernetes-validations": [rule(
            "size(self) == 2 && isIP(self[0]) && isIP(self[1]) ? ip(self[0]).family() != ip(self[1]).family() : true",
            "two addresses must be of different families",
        )],
    })
}

/// An observed list of at most two IP addresses, one per family (status side). `list_type` is
/// `atomic` or `set`, as the platform declares it.
fn status_ips(description: &str, list_type: &str) -> Value {
    json!({
        "type": "array",
        "description": description,
        "format": "ip",
        "maxItems": 2,
        "x-kubernetes-list-type": list_type,
        "items": {"type": "string"},
        "x-kubernetes-validations": [rule(
            "self == oldSelf || (size(self) == 2 && isIP(self[0]) && isIP(self[1]) ? ip(self[0]).family() != ip(self[1]).family() : true)",
            "two addresses must be of different families",
        )],
    })
}

/// The CIDRs of the machines' networks, each at most once.
fn machine_networks() -> Value {
    json!({
        "type": "array",
        "description": "The networks (CIDRs) the cluster's machines are on.",
        "maxItems": 32,
        "x-kubernetes-list-type": "atomic",
        "items": {
            "type": "string",
            "minLength": 1,
            "maxLength": 43,
            "x-kubernetes-validations": [rule("isCIDR(self)", "must be a CIDR")],
        },
        "x-kubernetes-validations": [rule(
            "self.all(x, self.exists_one(y, x == y))",
            "each network may be listed once",
        )],
    })
}

/// The rules of a platform spec with API and ingress addresses: once given, they stay given.
fn addresses_stay() -> Value {
    json!([
        rule(
            "!has(oldSelf.apiServerInternalIPs) || has(self.apiServerInternalIPs)",
            "apiServerInternalIPs cannot be removed once set",
        ),
        rule(
            "!has(oldSelf.ingressIPs) || has(self.ingressIPs)",
            "ingressIPs cannot be removed once set",
        ),
    ])
}

/// The spec of an on-premise platform that serves the API and ingress on virtual IPs.
fn on_prem_spec(description: &str) -> Value {
    json!({
        "type": "object",
        "description": description,
        "properties": {
            "apiServerInternalIPs": spec_ips("The virtual IPs of the internal API endpoint."),
            "ingressIPs": spec_ips("The virtual IPs of the ingress."),
            "machineNetworks": machine_networks(),
        },
        "x-kubernetes-validations": addresses_stay(),
    })
}

/// Who runs the load balancer of the API and ingress virtual IPs.
fn load_balancer() -> Value {
    json!({
        "type": "object",
        "description": "The load balancer in front of the API and ingress addresses.",
        "default": {"type": "OpenShiftManagedDefault"},
        "properties": {
            "type": {
                "type": "string",
                "description": "OpenShiftManagedDefault (the cluster's own) or UserManaged; fixed once set.",
                "default": "OpenShiftManagedDefault",
                "enum": ["OpenShiftManagedDefault", "UserManaged"],
                "x-kubernetes-validations": [rule(SET_ONCE, "cannot be changed once set")],
            },
        },
    })
}

/// The observed addresses of an on-premise platform. `list_type` is the list type of the
/// address lists; `machine_networks_too` says whether the platform reports its machine networks.
fn on_prem_status(description: &str, list_type: &str, machine_networks_too: bool) -> Value {
    let mut properties = json!({
        "apiServerInternalIP": with(string(), "description", json!("Deprecated: the first of apiServerInternalIPs.")),
        "apiServerInternalIPs": status_ips("The virtual IPs of the internal API endpoint.", list_type),
        "ingressIP": with(string(), "description", json!("Deprecated: the first of ingressIPs.")),
        "ingressIPs": status_ips("The virtual IPs of the ingress.", list_type),
        "loadBalancer": load_balancer(),
        "nodeDNSIP": with(string(), "description", json!("The IP of the nodes' internal DNS server.")),
    });
    if machine_networks_too && let Some(map) = properties.as_object_mut() {
        map.insert("machineNetworks".into(), machine_networks());
    }
    json!({"type": "object", "description": description, "properties": properties})
}

/// A platform status with just the two deprecated single addresses.
fn single_addresses(description: &str) -> Value {
    json!({
        "type": "object",
        "description": description,
        "properties": {
            "apiServerInternalIP": with(string(), "description", json!("The virtual IP of the internal API endpoint.")),
            "ingressIP": with(string(), "description", json!("The virtual IP of the ingress.")),
        },
    })
}

// ---------------------------------------------------------------------------------------------
// Cloud details

/// Custom AWS service endpoints (spec and status).
fn aws_service_endpoints() -> Value {
    json!({
        "type": "array",
        "description": "Endpoints that replace the public ones of AWS services.",
        "x-kubernetes-list-type": "atomic",
        "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The service's name (`ec2`, `s3`, ...).", "pattern": "^[a-z0-9-]+$"},
                "url": {"type": "string", "description": "The endpoint's https URL.", "pattern": "^https://"},
            },
        },
    })
}

/// The IBM Cloud services whose endpoints may be replaced; Power VS adds `Power`.
fn ibm_services(power: bool) -> Value {
    let mut names = vec![
        "CIS",
        "COS",
        "COSConfig",
        "DNSServices",
        "GlobalCatalog",
        "GlobalSearch",
        "GlobalTagging",
        "HyperProtect",
        "IAM",
        "KeyProtect",
    ];
    if power {
        names.push("Power");
    }
    names.extend(["ResourceController", "ResourceManager", "VPC"]);
    json!(names)
}

/// Custom Power VS service endpoints (spec and status).
fn powervs_service_endpoints() -> Value {
    json!({
        "type": "array",
        "description": "Endpoints that replace the public ones of IBM Cloud services.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {
            "type": "object",
            "required": ["name", "url"],
            "properties": {
                "name": {"type": "string", "enum": ibm_services(true)},
                "url": {"type": "string", "format": "uri", "pattern": "^https://"},
            },
        },
    })
}

/// Addresses a cluster-hosted DNS answers for.
fn load_balancer_ips(description: &str) -> Value {
    json!({
        "type": "array",
        "description": description,
        "format": "ip",
        "maxItems": 16,
        "x-kubernetes-list-type": "set",
        "items": {
            "type": "string",
            "minLength": 1,
            "maxLength": 39,
            "x-kubernetes-validations": [rule("isIP(self)", "must be an IP address")],
        },
    })
}

/// Who serves the DNS records of the cloud load balancers. `nullable` as the platform declares.
fn cloud_load_balancer_config(nullable: bool) -> Value {
    let config = json!({
        "type": "object",
        "description": "The DNS of the cluster's cloud load balancers.",
        "default": {"dnsType": "PlatformDefault"},
        "properties": {
            "dnsType": {
                "type": "string",
                "description": "PlatformDefault (the cloud's DNS) or ClusterHosted; fixed once set.",
                "default": "PlatformDefault",
                "enum": ["ClusterHosted", "PlatformDefault"],
                "x-kubernetes-validations": [rule(SET_ONCE, "cannot be changed once set")],
            },
            "clusterHosted": {
                "type": "object",
                "description": "The load balancer addresses, when the cluster hosts the DNS.",
                "properties": {
                    "apiIntLoadBalancerIPs": load_balancer_ips("Addresses of the internal API load balancer."),
                    "apiLoadBalancerIPs": load_balancer_ips("Addresses of the external API load balancer."),
                    "ingressLoadBalancerIPs": load_balancer_ips("Addresses of the ingress load balancer."),
                },
            },
        },
        "x-kubernetes-validations": [rule(
            "has(self.dnsType) && self.dnsType != 'ClusterHosted' ? !has(self.clusterHosted) : true",
            "clusterHosted is only for dnsType ClusterHosted",
        )],
    });
    if nullable {
        with(config, "nullable", json!(true))
    } else {
        config
    }
}

/// A list that may only be set whole at creation: no entry added or removed later.
fn unchanging_list() -> Value {
    json!([rule(
        "self.all(x, x in oldSelf) && oldSelf.all(x, x in self)",
        "cannot be changed once set",
    )])
}

/// The rule of an object whose `field` is set at creation or never.
fn set_at_creation(field: &str) -> Value {
    rule(
        &format!(
            "!has(oldSelf.{field}) && !has(self.{field}) || has(oldSelf.{field}) && has(self.{field})"
        ),
        &format!("{field} can only be set at creation"),
    )
}

/// A string of `min` to `max` characters.
fn bounded(min: u32, max: u32) -> Value {
    json!({"minLength": min, "maxLength": max})
}

fn aws_status() -> Value {
    let tag = |max: u32| {
        with(
            bounded(1, max),
            "x-kubernetes-validations",
            json!([rule(
                "self.matches('^[0-9A-Za-z_.:/=+-@ ]+$')",
                "only letters, digits, spaces and _.:/=+-@",
            )]),
        )
    };
    json!({"properties": {
        "cloudLoadBalancerConfig": cloud_load_balancer_config(true),
        "ipFamily": {
            "type": "string",
            "description": "The IP family of the cluster's networks; fixed once set.",
            "default": "IPv4",
            "enum": ["IPv4", "DualStackIPv6Primary", "DualStackIPv4Primary"],
            "x-kubernetes-validations": [rule(SET_ONCE, "cannot be changed once set")],
        },
        "resourceTags": {
            "maxItems": 25,
            "x-kubernetes-list-type": "atomic",
            "items": {"properties": {"key": tag(128), "value": tag(256)}},
        },
        "serviceEndpoints": aws_service_endpoints(),
    }})
}

fn azure_status() -> Value {
    json!({
        "properties": {
            "cloudLoadBalancerConfig": cloud_load_balancer_config(false),
            "resourceTags": {
                "maxItems": 10,
                "x-kubernetes-list-type": "atomic",
                "x-kubernetes-validations": unchanging_list(),
                "items": {"properties": {
                    "key": with(bounded(1, 128), "pattern", json!("^[a-zA-Z]([0-9A-Za-z_.-]*[0-9A-Za-z_])?$")),
                    "value": with(bounded(1, 256), "pattern", json!("^[0-9A-Za-z_.=+-@]+$")),
                }},
            },
        },
        "x-kubernetes-validations": [set_at_creation("resourceTags")],
    })
}

fn gcp_status() -> Value {
    json!({
        "properties": {
            "cloudLoadBalancerConfig": cloud_load_balancer_config(true),
            "resourceLabels": {
                "maxItems": 32,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["key"],
                "x-kubernetes-validations": unchanging_list(),
                "items": {"properties": {
                    "key": {
                        "minLength": 1,
                        "maxLength": 63,
                        "pattern": "^[a-z][0-9a-z_-]{0,62}$",
                        "x-kubernetes-validations": [rule(
                            "!self.startsWith('openshift-io') && !self.startsWith('kubernetes-io')",
                            "the openshift-io and kubernetes-io prefixes are reserved",
                        )],
                    },
                    "value": with(bounded(1, 63), "pattern", json!("^[0-9a-z_-]{1,63}$")),
                }},
            },
            "resourceTags": {
                "maxItems": 50,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["key"],
                "x-kubernetes-validations": unchanging_list(),
                "items": {"properties": {
                    "key": with(bounded(1, 63), "pattern", json!("^[a-zA-Z0-9]([0-9A-Za-z_.-]{0,61}[a-zA-Z0-9])?$")),
                    "parentID": with(bounded(1, 32), "pattern", json!("(^[1-9][0-9]{0,31}$)|(^[a-z][a-z0-9-]{4,28}[a-z0-9]$)")),
                    "value": with(bounded(1, 63), "pattern", json!(r"^[a-zA-Z0-9]([0-9A-Za-z_.@%=+:,*#&()\[\]{}\-\s]{0,61}[a-zA-Z0-9])?$")),
                }},
            },
        },
        "x-kubernetes-validations": [set_at_creation("resourceLabels"), set_at_creation("resourceTags")],
    })
}

fn crn(description: &str) -> Value {
    with(string(), "description", json!(description))
}

fn ibmcloud_status() -> Value {
    json!({"properties": {
        "cisInstanceCRN": crn("The CRN of the Cloud Internet Services instance of the cluster's DNS zone."),
        "dnsInstanceCRN": crn("The CRN of the DNS Services instance of the cluster's DNS zone."),
        "serviceEndpoints": {
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "required": ["name", "url"],
                "properties": {
                    "name": {"enum": ibm_services(false)},
                    "url": {
                        "maxLength": 300,
                        "x-kubernetes-validations": [rule("isURL(self)", "must be a URL")],
                    },
                },
            },
        },
    }})
}

fn powervs_status() -> Value {
    json!({
        "properties": {
            "cisInstanceCRN": crn("The CRN of the Cloud Internet Services instance of the cluster's DNS zone."),
            "dnsInstanceCRN": crn("The CRN of the DNS Services instance of the cluster's DNS zone."),
            "resourceGroup": {
                "maxLength": 40,
                "pattern": "^[a-zA-Z0-9-_ ]+$",
                "x-kubernetes-validations": [rule(SET_ONCE, "cannot be changed once set")],
            },
            "serviceEndpoints": powervs_service_endpoints(),
        },
        "x-kubernetes-validations": [rule(
            "!has(oldSelf.resourceGroup) || has(self.resourceGroup)",
            "resourceGroup cannot be removed once set",
        )],
    })
}

fn alibaba_status() -> Value {
    json!({
        "type": "object",
        "description": "Alibaba Cloud details of the platform.",
        "required": ["region"],
        "properties": {
            "region": {"type": "string", "description": "The region.", "pattern": "^[0-9A-Za-z-]+$"},
            "resourceGroupID": {"type": "string", "description": "The resource group (`rg-...`).", "pattern": "^(rg-[0-9A-Za-z]+)?$"},
            "resourceTags": {
                "type": "array",
                "description": "Tags applied to every resource of the cluster.",
                "maxItems": 20,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["key"],
                "items": {
                    "type": "object",
                    "required": ["key", "value"],
                    "properties": {
                        "key": with(bounded(1, 128), "type", json!("string")),
                        "value": with(bounded(1, 128), "type", json!("string")),
                    },
                },
            },
        },
    })
}

fn external_status() -> Value {
    json!({
        "type": "object",
        "description": "Details of a platform OpenShift has no integration for.",
        "properties": {
            "cloudControllerManager": {
                "type": "object",
                "description": "Whether a cloud controller manager is expected; set once.",
                "properties": {
                    "state": {
                        "type": "string",
                        "description": "External (one is installed) or None (empty is None).",
                        "enum": ["", "External", "None"],
                        "x-kubernetes-validations": [rule("self == oldSelf", "cannot be changed once set")],
                    },
                },
                "x-kubernetes-validations": [rule(
                    "(has(self.state) == has(oldSelf.state)) || (!has(oldSelf.state) && self.state != \"External\")",
                    "state cannot be added or removed once the object exists, except to None",
                )],
            },
        },
        "x-kubernetes-validations": [rule(
            "has(self.cloudControllerManager) == has(oldSelf.cloudControllerManager)",
            "cloudControllerManager cannot be added or removed once set",
        )],
    })
}

// ---------------------------------------------------------------------------------------------
// Nutanix and vSphere topology (spec)

/// A Nutanix object by UUID or by name, whichever `type` says.
fn nutanix_resource() -> Value {
    json!({
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {"type": "string", "description": "UUID or Name.", "enum": ["UUID", "Name"]},
            "uuid": {"type": "string", "description": "The object's UUID, for type UUID."},
            "name": {"type": "string", "description": "The object's name, for type Name."},
        },
        "x-kubernetes-validations": [
            rule("has(self.type) && self.type == 'UUID' ?  has(self.uuid) : !has(self.uuid)", "uuid is required for type UUID and only then"),
            rule("has(self.type) && self.type == 'Name' ?  has(self.name) : !has(self.name)", "name is required for type Name and only then"),
        ],
    })
}

/// A Prism endpoint: host and port.
fn prism_endpoint() -> Value {
    json!({
        "type": "object",
        "required": ["address", "port"],
        "properties": {
            "address": {"type": "string", "description": "Host name or IP.", "maxLength": 256},
            "port": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535},
        },
    })
}

fn nutanix_spec() -> Value {
    json!({
        "type": "object",
        "description": "The Nutanix Prism endpoints and failure domains.",
        "required": ["prismCentral", "prismElements"],
        "properties": {
            "prismCentral": prism_endpoint(),
            "prismElements": {
                "type": "array",
                "description": "The Prism Elements (clusters) machines may run on.",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["endpoint", "name"],
                    "properties": {
                        "endpoint": prism_endpoint(),
                        "name": {"type": "string", "maxLength": 256},
                    },
                },
            },
            "failureDomains": {
                "type": "array",
                "description": "Failure domains: a Prism Element and its subnet.",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["cluster", "name", "subnets"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "[a-z0-9]([-a-z0-9]*[a-z0-9])?"},
                        "cluster": nutanix_resource(),
                        "subnets": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": 1,
                            "x-kubernetes-list-type": "atomic",
                            "items": nutanix_resource(),
                        },
                    },
                },
            },
        },
    })
}

/// A vCenter or ESXi host: an IP address or a host name.
fn vsphere_server(min_length: bool) -> Value {
    let server = json!({
        "type": "string",
        "description": "IP address or host name.",
        "maxLength": 255,
        "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}, {"format": "hostname"}],
    });
    if min_length {
        with(server, "minLength", json!(1))
    } else {
        server
    }
}

/// A vSphere inventory path under `kind` (`host`, `datastore`, `vm`).
fn inventory_path(pattern: &str) -> Value {
    json!({"type": "string", "maxLength": 2048, "pattern": pattern})
}

fn vsphere_failure_domain() -> Value {
    let name80 = || json!({"type": "string", "minLength": 1, "maxLength": 80});
    json!({
        "type": "object",
        "required": ["name", "region", "server", "topology", "zone"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 256},
            "region": name80(),
            "zone": name80(),
            "server": vsphere_server(true),
            "regionAffinity": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"type": "string", "enum": ["ComputeCluster", "Datacenter"]}},
            },
            "zoneAffinity": {
                "type": "object",
                "required": ["type"],
                "properties": {
                    "type": {"type": "string", "enum": ["HostGroup", "ComputeCluster"]},
                    "hostGroup": {
                        "type": "object",
                        "required": ["hostGroup", "vmGroup", "vmHostRule"],
                        "properties": {"hostGroup": name80(), "vmGroup": name80(), "vmHostRule": name80()},
                    },
                },
                "x-kubernetes-validations": [rule(
                    "has(self.type) && self.type == 'HostGroup' ?  has(self.hostGroup) : !has(self.hostGroup)",
                    "hostGroup is required for type HostGroup and only then",
                )],
            },
            "topology": {
                "type": "object",
                "required": ["computeCluster", "datacenter", "datastore", "networks"],
                "properties": {
                    "datacenter": {"type": "string", "maxLength": 80},
                    "computeCluster": inventory_path("^/.*?/host/.*?"),
                    "datastore": inventory_path("^/.*?/datastore/.*?"),
                    "folder": inventory_path("^/.*?/vm/.*?"),
                    "resourcePool": inventory_path("^/.*?/host/.*?/Resources.*"),
                    "template": with(inventory_path("^/.*?/vm/.*?"), "minLength", json!(1)),
                    "networks": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 10,
                        "x-kubernetes-list-type": "atomic",
                        "items": {"type": "string"},
                    },
                },
            },
        },
        "x-kubernetes-validations": [
            rule(
                "has(self.zoneAffinity) && self.zoneAffinity.type == 'HostGroup' ?  has(self.regionAffinity) && self.regionAffinity.type == 'ComputeCluster' : true",
                "a HostGroup zone needs a ComputeCluster region",
            ),
            rule(
                "has(self.zoneAffinity) && self.zoneAffinity.type == 'ComputeCluster' ?  has(self.regionAffinity) && self.regionAffinity.type == 'Datacenter' : true",
                "a ComputeCluster zone needs a Datacenter region",
            ),
        ],
    })
}

/// Which network of a node is its internal or external one.
fn node_network() -> Value {
    let cidrs = |list_type: &str| {
        json!({
            "type": "array",
            "x-kubernetes-list-type": list_type,
            "items": {"type": "string", "format": "cidr"},
        })
    };
    json!({
        "type": "object",
        "properties": {
            "network": {"type": "string", "description": "The VM network's inventory path."},
            "networkSubnetCidr": cidrs("set"),
            "excludeNetworkSubnetCidr": cidrs("atomic"),
        },
    })
}

fn vsphere_spec() -> Value {
    let mut spec = on_prem_spec("vCenters, failure domains and addresses of a vSphere cluster.");
    let extra = json!({
        "failureDomains": {
            "type": "array",
            "description": "Where machines may be placed: a vCenter, datacenter and cluster each.",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": vsphere_failure_domain(),
        },
        "nodeNetworking": {
            "type": "object",
            "description": "How nodes' internal and external addresses are chosen.",
            "properties": {"external": node_network(), "internal": node_network()},
        },
        "vcenters": {
            "type": "array",
            "description": "The vCenters (at most three, each once).",
            "minItems": 1,
            "maxItems": 3,
            "x-kubernetes-list-type": "atomic",
            "items": {
                "type": "object",
                "required": ["datacenters", "server"],
                "properties": {
                    "server": vsphere_server(false),
                    "port": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 32767},
                    "datacenters": {
                        "type": "array",
                        "minItems": 1,
                        "x-kubernetes-list-type": "set",
                        "items": {"type": "string"},
                    },
                },
            },
            "x-kubernetes-validations": [rule(
                "self.all(x, self.exists_one(y, y.server == x.server))",
                "each vCenter may be listed once",
            )],
        },
    });
    merge(&mut spec, &json!({"properties": extra}));
    spec
}

// ---------------------------------------------------------------------------------------------

/// What the Infrastructure schema declares beyond our types, as a patch of the root schema.
pub fn declared() -> Value {
    let platform_spec = json!({
        "alibabaCloud": empty_object("Alibaba Cloud settings (none yet)."),
        "aws": {
            "type": "object",
            "description": "AWS settings.",
            "properties": {"serviceEndpoints": aws_service_endpoints()},
        },
        "azure": empty_object("Azure settings (none yet)."),
        "baremetal": on_prem_spec("Addresses of a bare metal cluster."),
        "equinixMetal": empty_object("Equinix Metal settings (none yet)."),
        "external": {
            "type": "object",
            "description": "Settings of a platform OpenShift has no integration for.",
            "properties": {
                "platformName": {
                    "type": "string",
                    "description": "The platform's name, for information; Unknown until set, then fixed.",
                    "default": "Unknown",
                    "x-kubernetes-validations": [rule(
                        "oldSelf == 'Unknown' || self == oldSelf",
                        "cannot be changed once set",
                    )],
                },
            },
        },
        "gcp": empty_object("GCP settings (none yet)."),
        "ibmcloud": empty_object("IBM Cloud settings (none yet)."),
        "kubevirt": empty_object("KubeVirt settings (none yet)."),
        "nutanix": nutanix_spec(),
        "openstack": on_prem_spec("Addresses of an OpenStack cluster."),
        "ovirt": empty_object("oVirt settings (none yet)."),
        "powervs": {
            "type": "object",
            "description": "Power VS settings.",
            "properties": {"serviceEndpoints": powervs_service_endpoints()},
        },
        "vsphere": vsphere_spec(),
    });
    let platform_status = json!({
        "alibabaCloud": alibaba_status(),
        "aws": aws_status(),
        "azure": azure_status(),
        "baremetal": on_prem_status("Addresses of a bare metal cluster.", "atomic", true),
        "equinixMetal": single_addresses("Addresses of an Equinix Metal cluster."),
        "external": external_status(),
        "gcp": gcp_status(),
        "ibmcloud": ibmcloud_status(),
        "kubevirt": single_addresses("Addresses of a KubeVirt cluster."),
        "nutanix": {
            "properties": {
                "apiServerInternalIP": with(string(), "description", json!("Deprecated: the first of apiServerInternalIPs.")),
                "apiServerInternalIPs": status_ips("The virtual IPs of the internal API endpoint.", "set"),
                "ingressIP": with(string(), "description", json!("Deprecated: the first of ingressIPs.")),
                "ingressIPs": status_ips("The virtual IPs of the ingress.", "set"),
                "loadBalancer": load_balancer(),
            },
            "type": "object",
            "description": "Addresses of a Nutanix cluster.",
        },
        "openstack": on_prem_status("OpenStack details: the cloud and the cluster's addresses.", "atomic", true),
        "ovirt": on_prem_status("Addresses of an oVirt cluster.", "set", false),
        "powervs": powervs_status(),
        "vsphere": on_prem_status("Addresses of a vSphere cluster.", "atomic", true),
    });
    let mut spec = Map::new();
    spec.insert(
        "platformSpec".into(),
        json!({
            "properties": platform_spec,
            "x-kubernetes-validations": [rule(
                "!has(oldSelf.vsphere) && has(self.vsphere) ? (has(self.vsphere.vcenters) && size(self.vsphere.vcenters) < 2) : true",
                "vSphere may be added with one vCenter at most",
            )],
        }),
    );
    json!({"properties": {
        "spec": {"properties": spec},
        "status": {"properties": {"platformStatus": {"properties": platform_status}}},
    }})
}
