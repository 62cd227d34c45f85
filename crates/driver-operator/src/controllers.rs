//! The logical controllers of a driver operator ([`Group`]) and the status part each writes
//! ([`ControllerStatus`]): the names every other file reports under, at the bottom so that the
//! migration audit, the plan and the controller loop can all use them.

use csi_kit::def::DriverDef;
use csi_kit::render::Operand;
use csi_kit::status;
use opkit::status::StatusPart;

/// The controller that owns the management-state condition.
pub const MANAGEMENT_STATE_CONTROLLER: &str = "ManagementState";
/// The StorageClass controller (fixed name, as in library-go).
pub const STORAGE_CLASS_CONTROLLER: &str = "StorageClassController";

/// The logical controllers of a driver operator; each applies its operands and writes its
/// conditions under its own field manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    /// RBAC, ServiceAccounts, ConfigMap, CSIDriver, Service, PDB, snapshot classes, credentials.
    Static,
    /// The controller Deployment.
    ControllerService,
    /// The node DaemonSet.
    NodeService,
    /// StorageClasses.
    StorageClass,
    /// The ServiceMonitor (a missing CRD is not an error).
    ServiceMonitor,
}

impl Group {
    /// Every group.
    pub const ALL: [Group; 5] = [
        Self::Static,
        Self::ControllerService,
        Self::NodeService,
        Self::StorageClass,
        Self::ServiceMonitor,
    ];

    /// The controller name: field manager suffix and condition type prefix.
    pub fn controller(self, def: &DriverDef) -> String {
        let prefix = &def.condition_prefix;
        match self {
            Self::Static => status::static_resources_controller(prefix),
            Self::ControllerService => status::controller_service_controller(prefix),
            Self::NodeService => status::node_service_controller(prefix),
            Self::StorageClass => STORAGE_CLASS_CONTROLLER.to_owned(),
            Self::ServiceMonitor => status::service_monitor_controller(prefix),
        }
    }

    /// `<controller>Degraded`.
    pub fn degraded_type(self, def: &DriverDef) -> String {
        format!("{}Degraded", self.controller(def))
    }

    /// The controller owning an operand.
    pub fn of(operand: &Operand) -> Self {
        match operand {
            Operand::Deployment(_) => Self::ControllerService,
            Operand::DaemonSet(_) => Self::NodeService,
            Operand::StorageClass(_) => Self::StorageClass,
            Operand::Dynamic(v) if v["kind"] == "ServiceMonitor" => Self::ServiceMonitor,
            _ => Self::Static,
        }
    }
}

/// One controller's status part.
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerStatus {
    /// The group whose errors turn its Degraded condition True (none for management state).
    pub group: Option<Group>,
    /// The controller name (field manager `storage-operator/<controller>`).
    pub controller: String,
    /// What it says.
    pub part: StatusPart,
}
