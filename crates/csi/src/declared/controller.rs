//! The CSIDriverDeployment controller (TODO).
