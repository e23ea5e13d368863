//! The answer cut into words, each with its place in code points, so a claim found
//! in them can name its span of the text the person reads.

/// One whitespace-separated piece of text, with the punctuation around it set apart.
#[derive(Debug, Clone)]
pub(super) struct Token {
    /// Where `core` starts and ends, in code points of the whole text.
    pub start: usize,
    pub end: usize,
    /// The piece without its surrounding punctuation and markdown.
    pub core: String,
    pub lower: String,
    /// What came before `core` in the piece ("(", "**", "$" is kept in `core`).
    pub before: String,
    /// What came after it ("," ".", "**").
    pub after: String,
    /// The first piece on its line.
    pub line_start: bool,
    /// The piece as written, punctuation included.
    pub piece: String,
}

impl Token {
    /// A clause ends after this piece.
    pub(super) fn ends_clause(&self) -> bool {
        self.after.contains([',', '.', ';', ':', '!', '?', '|'])
    }
}

const LEADING: &str = "([{\"'“‘*_`#>|~";
const TRAILING: &str = ",.!?;:)]}\"'”’…*_`|~";

pub(super) fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            if chars[i] == '\n' {
                line_start = true;
            }
            i += 1;
            continue;
        }
        let from = i;
        while i < chars.len() && !chars[i].is_whitespace() {
            i += 1;
        }
        let piece = &chars[from..i];
        let mut lead = 0;
        while lead < piece.len() && LEADING.contains(piece[lead]) {
            lead += 1;
        }
        let mut tail = piece.len();
        while tail > lead && TRAILING.contains(piece[tail - 1]) {
            tail -= 1;
        }
        let core: String = piece[lead..tail].iter().collect();
        out.push(Token {
            start: from + lead,
            end: from + tail,
            lower: core.to_lowercase(),
            core,
            before: piece[..lead].iter().collect(),
            after: piece[tail..].iter().collect(),
            line_start,
            piece: piece.iter().collect(),
        });
        line_start = false;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_keep_their_place_in_code_points() {
        let toks = tokens("Café: **60** customers,\n(forty)");
        let cores: Vec<&str> = toks.iter().map(|t| t.core.as_str()).collect();
        assert_eq!(cores, ["Café", "60", "customers", "forty"]);
        assert_eq!((toks[1].start, toks[1].end), (8, 10));
        assert!(toks[0].ends_clause() && toks[2].ends_clause());
        assert!(toks[3].line_start && !toks[1].line_start);
        assert_eq!(toks[3].before, "(");
    }
}
