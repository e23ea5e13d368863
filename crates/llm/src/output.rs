//! Tool output as the model is given it: cut at a cap, saying so.

/// What begins the note after output the cap cut.
pub const TRUNCATED: &str = "\n…[output truncated: ";

/// Output past the cap is cut, and says so, so the model knows it saw a part.
pub fn capped(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}{TRUNCATED}the first {cut} of {} bytes are shown; ask for less, e.g. with a smaller limit or a filter]",
        &text[..cut],
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::capped;

    #[test]
    fn output_past_the_cap_is_cut_with_a_marker() {
        let cut = capped("é".repeat(300), 257);
        assert!(cut.starts_with(&"é".repeat(128)));
        assert!(cut.contains("[output truncated: the first 256 of 600 bytes"));
        assert_eq!(capped("short".into(), 10), "short");
    }
}
