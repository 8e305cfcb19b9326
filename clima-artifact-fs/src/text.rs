//! Text from files, servers and archives, made safe to print.

/// `text` with every control character (escape sequences, carriage returns, newlines, DEL,
/// and the C1 controls) written as a Rust-style escape (`\u{1b}`, `\r`, `\n`), so that text
/// from a file, a server or an archive cannot move the cursor, retitle the terminal or forge
/// log lines when printed. Other text is returned as it is.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `s` as one word of a POSIX shell command line the tool prints as advice: as it is when it is
/// plain (letters, digits, `/._-+,:@%=`), else in single quotes (a quote inside as `'\''`),
/// control characters escaped ([`printable`]), so that the command runs as printed.
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%=".contains(&b));
    if plain {
        return s.to_owned();
    }
    format!("'{}'", printable(s).replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_when_needed() {
        assert_eq!(shell_word("/a/b-c"), "/a/b-c");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
