//! "Did you mean": the closest of the names a command knows (object keys,
//! kinds, bookmarks) to one it could not find, for the error that says so.

/// How alike two names must be (Jaro-Winkler, 0..1) to be suggested: close
/// enough for a typo or a dropped character, not for an unrelated name.
const THRESHOLD: f64 = 0.8;

/// The candidate most like `input`, when one is close enough.
pub fn closest<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .filter(|c| *c != input)
        .map(|c| (strsim::jaro_winkler(input, c), c))
        .filter(|(score, _)| *score >= THRESHOLD)
        .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, c)| c)
}

/// ` (did you mean "x"?)` for the closest candidate, or nothing: the piece an
/// error message puts after the name it could not find.
pub fn did_you_mean<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(input, candidates)
        .map(|c| format!(" (did you mean {c:?}?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_nearest_close_name_only() {
        let keys = ["zarr/imaging", "raw", "tables/labels"];
        assert_eq!(closest("zar/imaging", keys), Some("zarr/imaging"));
        assert_eq!(closest("tables/lables", keys), Some("tables/labels"));
        assert_eq!(closest("completely-different", keys), None);
        assert_eq!(
            closest("raw", keys),
            None,
            "an exact name is not a suggestion"
        );
        assert_eq!(
            did_you_mean("memroy", ["memory", "file"]),
            " (did you mean \"memory\"?)"
        );
        assert_eq!(did_you_mean("x", ["memory", "file"]), "");
    }
}
