//! The SDK carries the contract it is generated from: `sdk/wit` is a symlink to
//! the workspace's `wit/`, which `cargo package` follows, so the published crate
//! holds the files themselves. In the workspace, this checks that `sdk/wit` has
//! exactly `wit/`'s files with the same bytes (a checkout without symlinks, or a
//! copy left behind by hand, would let the SDK drift from the host's contract).

use std::collections::BTreeMap;
use std::path::Path;

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let entry = entry.unwrap();
        let path = entry.path();
        assert!(path.is_file(), "{} is not a file", path.display());
        let name = entry.file_name().into_string().unwrap();
        out.insert(name, std::fs::read(&path).unwrap());
    }
    out
}

#[test]
fn the_sdks_wit_is_the_workspace_contract() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ours = files(&crate_dir.join("wit"));
    assert!(
        ours.contains_key("backend.wit"),
        "sdk/wit has no backend.wit"
    );
    let workspace = crate_dir.join("..").join("wit");
    if !workspace.is_dir() {
        // A packaged crate: its wit/ is the copy `cargo package` made.
        return;
    }
    let theirs = files(&workspace);
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "sdk/wit and wit/ list different files: make sdk/wit the symlink `../wit` again"
    );
    for (name, bytes) in &theirs {
        assert!(
            ours[name] == *bytes,
            "sdk/wit/{name} differs from wit/{name}: make sdk/wit the symlink `../wit` again"
        );
    }
}
