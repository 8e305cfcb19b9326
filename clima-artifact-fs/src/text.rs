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
