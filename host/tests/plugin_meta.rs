//! Plugin metadata (`describe-meta`, since 0.1.5) through the `tether`
//! binary: `tether backends` and `tether plugin list` show each plugin's
//! name, version and authors, for the built-ins and a third-party plugin,
//! `-` / `null` for a plugin built before 0.1.5, and a hostile plugin's
//! metadata bounded and stripped of anything that could act on a terminal.

use std::collections::BTreeMap;

use crate::support::{Dataset, Vcs, describe, stdout};
use serde_json::{Value, json};

/// `--json` output of `args` as kind -> row.
fn rows(d: &Dataset, dir: &std::path::Path, args: &[&str]) -> BTreeMap<String, Value> {
    let out = d.tether_in(dir, args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let list: Vec<Value> = serde_json::from_str(&stdout(&out)).expect("JSON rows");
    list.into_iter()
        .map(|r| (r["kind"].as_str().unwrap().to_string(), r))
        .collect()
}

/// Nothing that could act on a terminal: C0/C1 controls but the line feeds
/// between lines, DEL, bidirectional overrides.
fn assert_inert(text: &str) {
    for c in text.chars() {
        assert!(
            c == '\n' || !(c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)),
            "{c:?} in:\n{text}"
        );
    }
}

#[test]
fn the_built_ins_say_who_they_are_outside_a_dataset() {
    let d = Dataset::new_in(Vcs::Git);
    let rows = rows(&d, d.tmp(), &["backends", "--json"]);
    assert!(rows.len() >= 10, "{rows:?}");
    for (kind, row) in &rows {
        let meta = &row["meta"];
        assert_eq!(
            meta["name"],
            json!(format!("tether-plugin-{kind}")),
            "{row}"
        );
        assert_eq!(meta["version"], json!("0.1.0"), "{row}");
        assert_eq!(meta["authors"], json!(["The tether developers"]), "{row}");
        assert_eq!(meta["license"], json!("Apache-2.0"), "{row}");
        // Every experimental built-in says what it was tested against.
        if row["maturity"] == json!("experimental") {
            assert!(meta["tested_against"].is_string(), "{row}");
        }
    }
    let neon = rows["neon"]["meta"]["tested_against"].as_str().unwrap();
    assert!(neon.contains("fake of the Neon API v2"), "{neon}");

    let out = d.tether_in(d.tmp(), &["backends"]);
    let text = stdout(&out);
    assert!(
        text.contains("  plugin tether-plugin-memory 0.1.0 by The tether developers\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("  tested against: {neon}\n")),
        "{text}"
    );
}

#[test]
fn a_dataset_lists_third_party_metadata_none_for_an_old_plugin_and_hostile_metadata_bounded() {
    let d = Dataset::init_in(Vcs::Git);
    for (stem, kind) in [
        ("acme", "acme"),
        ("abi_0_1_0", "abi-old"),
        ("hostile", "hostile"),
    ] {
        let wasm = tether_testkit::test_plugin(stem);
        d.ok(&["plugin", "add", wasm.to_str().unwrap(), "--kind", kind]);
    }

    let backends = rows(&d, &d.root(), &["backends", "--json"]);
    let acme = &backends["acme"]["meta"];
    assert_eq!(acme["name"], json!("acme"), "{acme}");
    assert_eq!(acme["version"], json!("0.0.0"), "{acme}");
    assert_eq!(acme["license"], json!("Apache-2.0"), "{acme}");
    assert_eq!(acme["authors"], json!([]), "{acme}");
    assert_eq!(backends["abi-old"]["meta"], json!(null));
    assert_eq!(
        backends["memory"]["meta"]["name"],
        json!("tether-plugin-memory")
    );
    let hostile = &backends["hostile"]["meta"];
    let name = hostile["name"].as_str().unwrap();
    assert!(
        name.starts_with("evil[2JNNN") && name.chars().count() <= 64,
        "{name}"
    );
    assert_eq!(
        hostile["version"],
        json!("6.6.6 FAKE-KIND  sha256:0000  built-in")
    );
    assert_eq!(hostile["authors"].as_array().unwrap().len(), 16);

    let list = rows(&d, &d.root(), &["plugin", "list", "--json"]);
    assert_eq!(list["acme"]["meta"], *acme);
    assert_eq!(list["abi-old"]["meta"], json!(null));
    assert_eq!(list["hostile"]["meta"], *hostile);

    // Human output: compact, "-" without metadata, nothing hostile reaches
    // the terminal and nothing forges a line.
    let text = d.ok(&["backends"]);
    assert!(text.contains("  plugin acme 0.0.0\n"), "{text}");
    assert!(text.contains("  plugin -\n"), "{text}");
    assert!(text.len() < 64 * 1024, "{} bytes", text.len());
    assert_inert(&text);
    assert!(!text.lines().any(|l| l.starts_with("FAKE-KIND")), "{text}");
    let text = d.ok(&["plugin", "list"]);
    let old = text.lines().find(|l| l.starts_with("abi-old ")).unwrap();
    assert!(old.contains("  -"), "{text}");
    assert!(text.contains("  acme 0.0.0"), "{text}");
    assert!(text.len() < 16 * 1024, "{} bytes", text.len());
    assert_inert(&text);
    assert_eq!(text.lines().count(), list.len(), "{text}");
}
