#![allow(clippy::unwrap_used)]
//! The registry (what CSO starts) and the driver catalogue (what each driver operator runs)
//! describe the same drivers: names, condition prefixes and removability agree.

use storage_operator::registry::registry;

#[test]
fn every_catalogue_driver_agrees_with_its_registry_entry() {
    for short_name in drivers::short_names() {
        let def = drivers::by_name(short_name).unwrap();
        let entry = registry()
            .into_iter()
            .find(|e| e.short_name == short_name)
            .unwrap_or_else(|| panic!("{short_name} is in the catalogue but not the registry"));
        assert_eq!(def.name, entry.csi_driver_name, "{short_name}: CSI name");
        assert_eq!(def.short_name, entry.short_name, "{short_name}: short name");
        assert_eq!(
            def.condition_prefix, entry.condition_prefix,
            "{short_name}: condition prefix"
        );
        assert_eq!(def.removable, entry.removable, "{short_name}: removable");
        assert_eq!(
            def.namespace,
            storage_operator::registry::DRIVER_NAMESPACE,
            "{short_name}: namespace"
        );
        assert_eq!(
            def.images.driver.env, "DRIVER_IMAGE",
            "{short_name}: CSO passes the driver image as DRIVER_IMAGE"
        );
    }
}

#[test]
fn the_registry_names_each_catalogue_driver_by_both_names() {
    for entry in registry() {
        if let Ok(def) = drivers::by_name(entry.short_name) {
            assert_eq!(
                drivers::by_name(entry.csi_driver_name).unwrap().short_name,
                def.short_name
            );
        }
    }
}
