//! Showing bytes tether did not write: a clone's files, a store's objects, a
//! plugin's messages. They are escaped so they cannot act on a terminal (an
//! escape sequence in a locator must not recolour, retitle or rewrite the
//! screen), and cut to an excerpt so an error about a 50 MB line is not
//! itself 50 MB.
//!
//! Escapes are written `\u001b`: the same spelling JSON uses, so text that is
//! JSON stays valid JSON (inside a string it reads back as the same
//! character) and text that is not reads plainly.

use std::borrow::Cow;
use std::fmt::Write as _;

// What can act on a terminal or hide what text says (the controls, the
// bidirectional overrides): one rule with what the host keeps of a plugin's
// metadata.
use tether_contract::meta::unsafe_on_terminal as is_unsafe;

/// How many characters of a clone- or store-controlled value an error
/// quotes: enough to recognise a line, a locator or a key.
pub const EXCERPT_CHARS: usize = 120;

/// The most bytes one whole message (an error with its causes, a
/// per-object error line) is printed with: generous for anything tether
/// writes itself, small beside a hostile one.
pub const MESSAGE_BYTES: usize = 16 * 1024;

fn escape_if(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) && !keep(c) {
            // Every unsafe character is in the Basic Multilingual Plane.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` safe to print as lines: every character that could act on a
/// terminal escaped, except line feeds and tabs, which lay text out.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_if(text, |c| c == '\n' || c == '\t')
}

/// `text` safe to print inside one line: [`escape`], and line feeds and
/// tabs escaped too, so a value cannot forge a line of output.
pub fn escape_inline(text: &str) -> Cow<'_, str> {
    escape_if(text, |_| false)
}

/// At most `max` characters of `text`, escaped for one line, with how much
/// was left out when it was cut: what an error quotes of a value it did not
/// write.
pub fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => escape_inline(text).into_owned(),
        Some((cut, _)) => format!(
            "{}… ({} more bytes)",
            escape_inline(&text[..cut]),
            text.len() - cut
        ),
    }
}

/// [`excerpt`] with the usual length, [`EXCERPT_CHARS`].
pub fn quote(text: &str) -> String {
    excerpt(text, EXCERPT_CHARS)
}

/// `text` cut to at most `max` bytes (on a character boundary), saying how
/// much was left out: the last bound on a whole message, whatever it quotes.
pub fn bound(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Cow::Owned(format!(
        "{}… ({} more bytes not shown)",
        &text[..cut],
        text.len() - cut
    ))
}

/// A whole message ready for a terminal: bounded to [`MESSAGE_BYTES`], then
/// escaped (line feeds and tabs kept).
pub fn message(text: &str) -> String {
    escape(&bound(text, MESSAGE_BYTES)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_plain_text_is_borrowed() {
        assert!(matches!(escape("plain é ✓ text\n\tok"), Cow::Borrowed(_)));
        assert_eq!(
            escape("a\x1b[31mred\x07\r"),
            "a\\u001b[31mred\\u0007\\u000d"
        );
        assert_eq!(escape("x\u{9b}2J\u{7f}"), "x\\u009b2J\\u007f");
        assert_eq!(escape("l\u{202e}txt.exe"), "l\\u202etxt.exe");
        assert_eq!(escape("two\nlines"), "two\nlines");
        assert_eq!(escape_inline("two\nlines\t"), "two\\u000alines\\u0009");
        // JSON reads the escape back as the character it stands for.
        let json = format!("\"{}\"", escape("\u{9b}\u{202e}"));
        let back: String = serde_json::from_str(&json).unwrap();
        assert_eq!(back, "\u{9b}\u{202e}");
    }

    #[test]
    fn excerpts_and_bounds_say_what_they_left_out() {
        assert_eq!(excerpt("short", 10), "short");
        assert_eq!(excerpt("ééééé", 2), "éé… (6 more bytes)");
        assert_eq!(excerpt("a\nb", 10), "a\\u000ab");
        let long = "x".repeat(1000);
        assert_eq!(quote(&long).chars().filter(|c| *c == 'x').count(), 120);
        assert_eq!(bound("abc", 3), "abc");
        assert_eq!(bound("aé", 2), "a… (2 more bytes not shown)");
        let huge = "y".repeat(10 * MESSAGE_BYTES);
        assert!(message(&huge).len() < MESSAGE_BYTES + 64);
    }
}
